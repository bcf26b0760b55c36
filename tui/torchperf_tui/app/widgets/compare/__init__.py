"""widgets compare widgets."""
