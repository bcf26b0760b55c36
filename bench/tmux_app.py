"""The app started in a tmux session as a user would start it, for the bench scripts that watch it run."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from contextlib import contextmanager
from typing import Iterator


def require_tmux() -> None:
    if shutil.which("tmux") is None:
        raise SystemExit("tmux is needed (apt-get install tmux)")


@contextmanager
def app_in_tmux(command: str, session: str, *, width: int = 80, height: int = 24,
                cwd: str | None = None) -> Iterator[str]:
    """Run `command` in a new detached tmux session of `width` x `height`; on leaving, press q (the app's
    own quit, so it restores the terminal and stops its measurement process) and close the session."""
    subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True)
    where = ["-c", cwd] if cwd else []
    subprocess.run(["tmux", "new-session", "-d", "-s", session, "-x", str(width), "-y", str(height), *where,
                    command], check=True)
    try:
        yield session
    finally:
        subprocess.run(["tmux", "send-keys", "-t", session, "q"], capture_output=True)
        time.sleep(1.0)
        subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True)


def send_keys(session: str, *keys: str) -> None:
    subprocess.run(["tmux", "send-keys", "-t", session, *keys], check=True)


TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """The CPU time process `pid` has used (utime + stime from /proc), in seconds."""
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS
