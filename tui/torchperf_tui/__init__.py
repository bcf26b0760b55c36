"""torchperf-tui: how fast is this PyTorch model on this box, and why.

Importing the package is cheap on purpose: torch is only imported by the engine modules, so the TUI can
paint its first frame before paying for it.
"""

__version__ = "0.1.0"
