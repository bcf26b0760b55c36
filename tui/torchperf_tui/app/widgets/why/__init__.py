"""The Why tab."""
