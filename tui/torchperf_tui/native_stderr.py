"""Silencing the native (C++) writes to file descriptor 2 around torch.profiler, for the TUI and the CLI."""

from __future__ import annotations

import contextlib
import os
import tempfile
import threading


@contextlib.contextmanager
def native_stderr_silenced():
    """torch.profiler's C++ side (Kineto) writes log lines straight to file descriptor 2 (the terminal
    Textual draws on, or the CLI's error stream), lines that read like failures but are not: send fd 2 to
    a log file while the profiler starts and stops. In the TUI Textual's own writes in that window are
    lost too, so the caller repaints the screen afterwards."""
    log = os.path.join(tempfile.gettempdir(), "torchperf-tui", "profiler-stderr.log")
    # One redirect at a time: a second profile (the first one cancelled and finishing) that saved the
    # redirected fd 2 would restore the log file instead of the terminal.
    with _stderr_lock:
        try:
            os.makedirs(os.path.dirname(log), exist_ok=True)
            target = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            saved = os.dup(2)
        except OSError:
            yield  # no redirect possible: the log lines may show, nothing else changes
            return
        try:
            os.dup2(target, 2)
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            os.close(target)


_stderr_lock = threading.Lock()
