"""The measurement engine: plain functions and dataclasses, no Textual import.

Every module here serves the CLI, the TUI, scripts and tests alike.
"""
