"""The files the app keeps for the user, which no output may be written over: the history in use and the measured
ceilings. An export, a trace, a snapshot or a screenshot pointed at one of them, by any spelling of its path, through
a linked folder or by a hard link, is refused (core/output_files.py asks here before every write); so is a
history or ceilings file that is the other one.

The history in use is $TORCHPERF_HISTORY (the CLI puts its --history there, so that its measurement process
knows it too), else the user's data directory; the ceilings file is $TORCHPERF_CEILINGS, else beside it. Standard
library only (platformdirs, late): the app's process and the CLI's ask here without torch.
"""

from __future__ import annotations

import os
from pathlib import Path

HISTORY_ENV = "TORCHPERF_HISTORY"
CEILINGS_ENV = "TORCHPERF_CEILINGS"
APP_NAME = "torchperf-tui"  # the user data directory's name
HISTORY_FILENAME = "history.jsonl"
CEILINGS_FILENAME = "ceilings.json"
HISTORY, CEILINGS = "history", "ceilings"
CATALOGUE_CACHE_ENV = "TORCHPERF_CATALOGUE_CACHE"  # the model catalogue's listing (engine/workloads/catalogue_cache.py)
# The variables that choose the files a job reads and writes: a job carries its sender's values (measure/protocol.py's
# StartJob), and the measurement process runs it under them, whatever it was started with.
FILE_ENVS = (HISTORY_ENV, CEILINGS_ENV, CATALOGUE_CACHE_ENV)


def files_environ() -> dict[str, str]:
    """This process's FILE_ENVS as they are set now (unset ones left out)."""
    return {name: os.environ[name] for name in FILE_ENVS if name in os.environ}


def default_history_path(path: str | os.PathLike | None = None) -> Path:
    """Where the history lives: `path` if given, else $TORCHPERF_HISTORY, else the user's data directory."""
    if path is not None and str(path) != "":
        return Path(path).expanduser()
    return _chosen(HISTORY_ENV, HISTORY_FILENAME)


def ceilings_path() -> Path:
    """$TORCHPERF_CEILINGS, else the user data directory's ceilings.json."""
    return _chosen(CEILINGS_ENV, CEILINGS_FILENAME)


def _chosen(env_name: str, filename: str) -> Path:
    env = os.environ.get(env_name, "").strip()
    if env:
        return Path(env).expanduser()
    import platformdirs  # installed with Textual; imported late, only these paths need it

    return Path(platformdirs.user_data_dir(APP_NAME)) / filename


def kept_file_at(path: str | os.PathLike, own: str | None = None) -> str | None:
    """Which kept file `path` is, in words ('the history file in use'), or None. `own`: the kept file this
    write is (HISTORY, CEILINGS): writing it is what it is for, so it is not named."""
    kept = {HISTORY: ("the history file in use", default_history_path), CEILINGS: ("the ceilings file", ceilings_path)}
    for key, (name, where) in kept.items():
        if key != own and _same_file(Path(path).expanduser(), where()):
            return name
    return None


def _same_file(a: Path, b: Path) -> bool:
    """Whether a and b are one file: the same inode when both exist (a hard link, another spelling), else the
    same path once links and '..' are resolved (neither written yet)."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        if os.path.lexists(a) != os.path.lexists(b):
            return False
        return os.path.realpath(a) == os.path.realpath(b)
