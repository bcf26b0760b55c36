"""widgets timing widgets."""
