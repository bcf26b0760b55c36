"""Widgets, one folder per area of the screen."""
