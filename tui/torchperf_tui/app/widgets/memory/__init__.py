"""widgets memory widgets."""
