"""widgets device widgets."""
