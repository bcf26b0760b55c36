"""The ranks a test started and that are still there: none may be once a run across processes has ended."""

from __future__ import annotations

import psutil


def ranks_left() -> list[int]:
    """This process's children that are ranks (the spawn context's resource tracker is not one)."""
    return [child.pid for child in psutil.Process().children(recursive=True)
            if "spawn_main" in " ".join(child.cmdline()) and child.is_running()
            and child.status() != psutil.STATUS_ZOMBIE]
