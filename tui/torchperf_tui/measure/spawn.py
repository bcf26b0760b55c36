"""How a measurement process is launched: a new interpreter running `python -P -m torchperf_tui.measure`,
connected to this one by a socket pair, with its CPUs and where its output goes. The client (client.py) decides
when; this says how."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from multiprocessing.connection import Connection

from torchperf_tui.measure.process import CPUS_ENV, PRINTS_TO_STDERR, log_file


def spawn(log_template: str, cpus: frozenset[int] | None, prints_to_stderr: bool):
    """Start one measurement process: (the Popen, this side's Connection to it, its log's path). `cpus`: the
    CPUs it runs on (it sets them itself before it imports torch); `prints_to_stderr`: its stdout (the model's
    prints) to this process's stderr instead of its log (the CLI)."""
    ours, theirs = socket.socketpair()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    env.pop(CPUS_ENV, None)
    if cpus:
        env[CPUS_ENV] = ",".join(str(cpu) for cpu in sorted(cpus))
    # -P (3.11+): the current folder is not put first on the path, so a PyTorch source tree there does not
    # shadow the installed torch (a user's model module there still imports: engine/workloads/models.py).
    safe_path = ["-P"] if sys.version_info >= (3, 11) else []
    process = subprocess.Popen([sys.executable, *safe_path, "-m", "torchperf_tui.measure", str(theirs.fileno()),
                                log_template, *([PRINTS_TO_STDERR] if prints_to_stderr else [])],
                               pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL, stderr=None if prints_to_stderr else subprocess.DEVNULL,
                               env=env, close_fds=True)
    theirs.close()
    return process, Connection(ours.detach()), log_file(log_template, process.pid)
