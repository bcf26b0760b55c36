"""widgets picker widgets."""
