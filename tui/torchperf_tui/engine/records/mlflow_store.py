"""Results to an MLflow tracking store: a local one (`sqlite:///path/mlflow.db`) or a tracking server (`http://...`).

MLflow is an optional extra (`pip install 'torchperf-tui[mlflow]'`: mlflow-skinny with SQLAlchemy and Alembic for a
sqlite store, bench/results/mlflow_install.txt says why not the full `mlflow`). It is imported only here, by
`MlflowSink.open`, which checks everything a bad URI can get wrong before a measurement starts: the scheme, MLflow
being installed, the sqlite file (check_sqlite), and the store answering (a tracking server gets a short timeout and
one retry, not MLflow's default of 120 s and 7 retries; MLFLOW_HTTP_REQUEST_TIMEOUT and
MLFLOW_HTTP_REQUEST_MAX_RETRIES set by the user win). Every failure is a MlflowStoreError: one line.

A sqlite file is checked here, with the standard library, before MLflow sees it: MLflow retries a database it cannot
open for 100 s, with a warning of four lines each time, so a folder, a FIFO, a device or a read-only folder in the
URI must never reach it. An in-memory database (`sqlite://`, `sqlite:///`, `sqlite:///:memory:`) is refused: MLflow
would log to it, say so, and lose the run when the command ends.

One MlflowClient with the URI given, never the global `mlflow.set_tracking_uri` state: the app and a script may
hold other clients. MLflow imports no torch (tests/engine/test_mlflow_store.py checks it in a fresh process).
"""

from __future__ import annotations

import json
import logging
import os
import re
import stat
import tempfile
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlparse

from torchperf_tui.core.errors import TorchperfError, first_line
from torchperf_tui.engine.records.mlflow_runs import ARTIFACT, RunContent

INSTALL_LINE = "pip install 'torchperf-tui[mlflow]'"
DEFAULT_EXPERIMENT = "torchperf-tui"  # MLFLOW_EXPERIMENT_NAME, MLflow's own variable, names another
# sqlalchemy's schemes (MLflow's DATABASE_ENGINES) and a tracking server's; `file:` (MLflow's file store, in
# maintenance) and bare paths are refused with the two forms to use.
SCHEMES = ("sqlite", "postgresql", "mysql", "mssql", "http", "https", "databricks")
HTTP_DEFAULTS = {"MLFLOW_HTTP_REQUEST_TIMEOUT": "10", "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "1",
                 "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1"}
FORMS = "a local store (sqlite:///path/mlflow.db) or a tracking server (http://HOST:PORT)"
# sqlite[+driver]://[host]/database[?query], as SQLAlchemy splits it (a host is not a sqlite thing: refused).
SQLITE_URI = re.compile(r"sqlite(\+[\w.]+)?://(?P<host>[^/?#]*)(?:/(?P<database>[^?#]*))?(?:\?(?P<query>[^#]*))?$",
                        re.IGNORECASE)
SQLITE_HEADER = b"SQLite format 3\x00"  # the first 16 bytes of every sqlite database file
_NOT_FILES = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
              (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


class MlflowStoreError(TorchperfError):
    """A tracking URI that cannot be used (its scheme, a store that does not answer), or MLflow not installed."""


def check_uri(uri: str) -> str:
    """The URI, stripped, if its scheme is one MLflow tracks to; else the one line saying which forms are."""
    text = (uri or "").strip()
    if not text:
        raise MlflowStoreError(f"--mlflow needs a tracking URI: {FORMS}")
    scheme = urlparse(text).scheme.lower().split("+", 1)[0]  # postgresql+psycopg2:// is postgresql's
    if scheme not in SCHEMES:
        said = f"scheme {scheme!r}" if scheme else "no scheme"
        raise MlflowStoreError(f"MLflow URI {text!r}: {said}; give {FORMS}")
    if scheme == "sqlite":
        check_sqlite(text)
    return text


def sqlite_path(uri: str) -> Path:
    """The database file of `sqlite:///relative.db` or `sqlite:////absolute/path.db`, absolute (as SQLAlchemy
    reads the URI: percent-escapes decoded, a query left out). MlflowStoreError for a URI that names no file."""
    found = SQLITE_URI.match(uri.strip())
    if found is None:
        raise MlflowStoreError(f"MLflow URI {uri!r}: not a sqlite URI; give sqlite:///path/mlflow.db")
    if found["host"]:
        raise MlflowStoreError(f"MLflow URI {uri!r}: a sqlite URI has no host: three slashes before a relative path "
                               "(sqlite:///mlflow.db), four before an absolute one (sqlite:////srv/mlflow.db)")
    database = unquote(found["database"] or "")
    mode = parse_qs(found["query"] or "").get("mode", [])
    if database in ("", ":memory:") or "memory" in mode:
        raise MlflowStoreError(f"MLflow URI {uri!r} is an in-memory database: the run would be lost when the command "
                               "ends; give a file, sqlite:///path/mlflow.db")
    if database.startswith("file:"):
        raise MlflowStoreError(f"MLflow URI {uri!r}: give the database's path, sqlite:///path/mlflow.db, not a "
                               "sqlite file: URI")
    if "ro" in mode:
        raise MlflowStoreError(f"MLflow URI {uri!r} opens the database read-only (mode=ro): a run cannot be logged")
    return Path(os.path.abspath(database))


def check_sqlite(uri: str) -> Path:
    """The database file of a sqlite URI, if MLflow can keep runs there: a folder that exists and this process may
    write in (the database's journal goes beside it), and the file a regular sqlite database this process may read
    and write, or not there yet. Else one MlflowStoreError line, at once: never a path MLflow would retry."""
    path = sqlite_path(uri)
    folder = path.parent
    if not folder.is_dir():
        raise MlflowStoreError(f"MLflow URI {uri!r}: no folder {folder} for its database")
    try:  # a file made and gone at once: the folder's mode, a read-only mount and /proc alike, as root too
        tempfile.TemporaryFile(dir=folder).close()
    except OSError as exc:
        raise MlflowStoreError(f"MLflow URI {uri!r}: cannot write in the folder {folder} ({exc.strerror or exc}): the "
                               "database and its journal are written there") from None
    try:
        mode = os.stat(path).st_mode  # a link to a database is followed, as sqlite does
    except FileNotFoundError:
        if os.path.islink(path):
            raise MlflowStoreError(f"MLflow URI {uri!r}: {path} is a symbolic link to nothing") from None
        return path  # MLflow creates it
    except OSError as exc:
        raise MlflowStoreError(f"MLflow URI {uri!r}: cannot use {path}: {exc.strerror or exc}") from None
    kind = next((name for test, name in _NOT_FILES if test(mode)), None)
    if kind is not None or not stat.S_ISREG(mode):
        raise MlflowStoreError(f"MLflow URI {uri!r}: {path} is {kind or 'not a regular file'}, not a database file")
    if not os.access(path, os.R_OK | os.W_OK):
        raise MlflowStoreError(f"MLflow URI {uri!r}: {path} is not writable by this user")
    with open(path, "rb") as fh:
        header = fh.read(len(SQLITE_HEADER))
    if header and header != SQLITE_HEADER:
        raise MlflowStoreError(f"MLflow URI {uri!r}: {path} is not a sqlite database (it holds something else)")
    return path


def import_mlflow():
    """The mlflow module, or the one line that says how to install it."""
    try:
        import mlflow  # noqa: F401 - the optional extra
        from mlflow import MlflowClient  # noqa: F401
    except ImportError as exc:
        raise MlflowStoreError(f"--mlflow needs MLflow, which is not installed ({first_line(exc)}): "
                               f"{INSTALL_LINE}") from None
    for name in ("mlflow", "alembic", "sqlalchemy"):  # their INFO lines ("Creating initial MLflow database tables")
        logging.getLogger(name).setLevel(logging.WARNING)
    return mlflow


class MlflowSink:
    """An open tracking store with the experiment the runs go to. `open` checks it answers; `write` logs one run
    (thread-safe: the app logs from worker threads)."""

    def __init__(self, uri: str, client: Any, experiment_id: str, experiment: str) -> None:
        self.uri = uri
        self.client = client
        self.experiment_id = experiment_id
        self.experiment = experiment
        self._lock = threading.Lock()

    @classmethod
    def open(cls, uri: str, experiment: str | None = None) -> "MlflowSink":
        uri = check_uri(uri)
        import_mlflow()
        from mlflow import MlflowClient

        for key, value in HTTP_DEFAULTS.items():
            os.environ.setdefault(key, value)
        name = experiment or os.environ.get("MLFLOW_EXPERIMENT_NAME") or DEFAULT_EXPERIMENT
        try:
            client = MlflowClient(tracking_uri=uri)
            found = client.get_experiment_by_name(name)
            if found is None:
                experiment_id = client.create_experiment(name, artifact_location=_artifact_location(uri))
            else:
                experiment_id = found.experiment_id
        except MlflowStoreError:
            raise
        except Exception as exc:  # noqa: BLE001 - MLflow's, requests' and sqlalchemy's errors alike: one line
            raise MlflowStoreError(f"MLflow store {uri} cannot be used: {_reason(exc)}") from None
        return cls(uri, client, experiment_id, name)

    def write(self, content: RunContent) -> str:
        """Log one run (parameters, metrics, tags, then samples.json) and end it; -> its run id. A failure ends the
        run FAILED where it was created, and is one line."""
        from mlflow.entities import Metric, Param, RunTag

        now = int(time.time() * 1000)
        with self._lock:
            run_id = None
            try:
                run = self.client.create_run(self.experiment_id, run_name=content.name)
                run_id = run.info.run_id
                params = [Param(k, v) for k, v in content.params.items()]
                tags = [RunTag(k, v) for k, v in content.tags.items()]
                metrics = [Metric(k, v, now, step) for k, v, step in content.metrics]
                for start in range(0, max(len(metrics), 1), 1000):  # log_batch takes at most 1000 metrics
                    self.client.log_batch(run_id, metrics=metrics[start:start + 1000],
                                          params=params if start == 0 else [], tags=tags if start == 0 else [])
                self.client.log_text(run_id, json.dumps(content.artifact, indent=1, default=str), ARTIFACT)
                self.client.set_terminated(run_id, "FINISHED")
            except Exception as exc:  # noqa: BLE001 - one line, whatever MLflow raised
                if run_id is not None:
                    try:
                        self.client.set_terminated(run_id, "FAILED")
                    except Exception:  # noqa: BLE001 - the first failure is the one to say
                        pass
                raise MlflowStoreError(f"run not logged to MLflow ({self.uri}): {_reason(exc)}") from None
        return run_id


def _artifact_location(uri: str) -> str | None:
    """Where a new experiment keeps its artifacts: beside a sqlite database (MLflow's default, ./mlruns, is the
    current folder's); a server's own choice otherwise."""
    if urlparse(uri).scheme.lower() != "sqlite":
        return None
    return (sqlite_path(uri).parent / "mlartifacts").as_uri()


def _reason(exc: BaseException) -> str:
    """One short line of an MLflow error: a refused connection or a timeout said plainly, else its first line."""
    text = first_line(exc)
    lowered = text.lower()
    if "connection refused" in lowered or "failed to establish a new connection" in lowered:
        return "nothing answers there (connection refused)"
    if "timed out" in lowered or "timeout" in lowered:
        return f"no answer within {os.environ.get('MLFLOW_HTTP_REQUEST_TIMEOUT', '?')} s (timed out)"
    return text if len(text) <= 300 else text[:299] + "…"
