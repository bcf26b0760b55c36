"""Throughput widgets."""
