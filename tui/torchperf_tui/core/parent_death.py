"""A child process that ends with the process that started it, even when that one is killed (no orphans holding a GPU
or a port): Linux's parent-death signal. No torch: the measurement process and a collective's ranks both ask for it
before anything heavy is imported."""

from __future__ import annotations

import ctypes
import signal
import sys


def signal_on_parent_death(sig: int = signal.SIGTERM) -> bool:
    """Linux: `sig` is sent to this process when its parent ends; False where it cannot be asked (another system,
    no libc)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, sig)
    except (OSError, AttributeError):
        return False
    return True
