"""`torchperf-tui --mlflow URI`: every finished run in the app logged as an MLflow run, as the CLI's --mlflow logs
one (engine/records/mlflow_runs.py says what a run holds).

Everything here runs in worker threads, never on the event loop: importing MLflow takes a second or two, and a
tracking server may take its timeout to answer. The store is opened once, when the app starts (a URI that cannot be
used is an error notification and the app goes on without logging); then a timing, an A/B or a generation is logged
from the thread that saved it to the history (app/runs.py's save_run), a throughput search and a sweep from a thread
of their own. A run that fails to log is a warning notification, never a crash."""

from __future__ import annotations

import threading
from typing import Any

from torchperf_tui.wording.history import history_line
from torchperf_tui.core.errors import user_message


class MlflowLink:
    def __init__(self, uri: str) -> None:
        self.uri = uri
        self.sink: Any = None
        self.error: str | None = None  # why the store could not be opened: nothing is logged then
        self._opened = threading.Event()
        self._lock = threading.Lock()

    def start(self, app) -> None:
        """Open the store in a worker thread; say the outcome in a notification."""
        app.run_worker(lambda: self._open(app), thread=True, group="mlflow", exit_on_error=False)

    def _open(self, app) -> None:
        # Local: the engine (and MLflow) load in a worker thread after the first frame (Session.load_engine).
        from torchperf_tui.engine.records.mlflow_store import MlflowSink

        try:
            self.sink = MlflowSink.open(self.uri)
        except Exception as exc:  # noqa: BLE001 - a message, never a crash: the app runs on without MLflow
            self.error = user_message(exc)
            app.call_from_thread(app.notify, f"{self.error}; runs are not logged to MLflow", title="MLflow",
                                 severity="error", timeout=12)
        else:
            app.call_from_thread(app.notify, f"every finished run is logged to experiment {self.sink.experiment!r} "
                                 f"at {self.uri}", title="MLflow", timeout=5)
        finally:
            self._opened.set()

    def log_records(self, app, result: Any, fingerprint: dict | None, saved: list) -> None:
        """From a worker thread: a finished timing, A/B or generation by its history records (`saved`: those just
        written, whose ids are tagged; else built here from the measurement process's fingerprint)."""
        # Local: the engine loads in a worker thread after the first frame (Session.load_engine).
        from torchperf_tui.engine.records.mlflow_runs import describe_records
        from torchperf_tui.engine.records.result_records import records_of  # (the same)

        self._write(app, lambda: describe_records(saved or records_of(result, fingerprint=fingerprint or {}),
                                                  bool(saved), history_line))

    def log_result(self, app, kind: str, result: Any, extra: dict) -> None:
        """A finished throughput search or sweep, in a worker thread of its own."""
        if result.cancelled:
            return
        # Local: the engine loads in a worker thread after the first frame (Session.load_engine).
        from torchperf_tui.engine.records.mlflow_runs import describe_sweep, describe_throughput

        fingerprint = extra.get("fingerprint") or {}
        describe = (lambda: describe_throughput(result, fingerprint)) if kind == "throughput" else \
            (lambda: describe_sweep(result, fingerprint))
        app.run_worker(lambda: self._write(app, describe), thread=True, group="mlflow", exit_on_error=False)

    def _write(self, app, describe) -> None:
        self._opened.wait(timeout=120)
        if self.sink is None:
            return  # said once, when the store could not be opened
        try:
            with self._lock:
                content = describe()
                self.sink.write(content)
        except Exception as exc:  # noqa: BLE001 - a warning: the run is on screen and in the history
            app.call_from_thread(app.notify, user_message(exc), title="MLflow", severity="warning", timeout=8)
        else:
            app.call_from_thread(app.notify, f"logged: {content.name}", title="MLflow", timeout=3)
