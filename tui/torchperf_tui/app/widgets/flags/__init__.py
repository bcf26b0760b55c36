"""widgets flags widgets."""
