"""widgets layers widgets."""
