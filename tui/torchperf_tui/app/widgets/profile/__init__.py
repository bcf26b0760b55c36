"""Profiler widgets."""
