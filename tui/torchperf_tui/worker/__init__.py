"""The measurement process: the one place where the TUI's torch work runs (see worker/main.py)."""
