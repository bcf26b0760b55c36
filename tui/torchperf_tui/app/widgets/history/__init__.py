"""History widgets."""
