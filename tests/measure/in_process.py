"""The measurement process's serve loop run in the test's own process, for the few CLI tests that must
monkeypatch torch or the engine (a broken torch.compile, a fake NVML): what they patch is not seen by a new
interpreter. Everything else of the path is the real one: the process's JobServer.serve (phases, one-line
failures), the RUNNERS, and every message pickled and unpickled as over the pipe."""

from __future__ import annotations

import itertools
import pickle

from torchperf_tui.core.kept_files import files_environ
from torchperf_tui.measure.process import JobServer
from torchperf_tui.measure.protocol import PHASE, Progress, StartJob, unpack


class _Pipe:
    def __init__(self, deliver) -> None:
        self.deliver = deliver

    def send(self, envelope) -> None:
        message = unpack(pickle.loads(pickle.dumps(envelope)))
        if not (isinstance(message, Progress) and message.what == PHASE):
            self.deliver(message)


class InProcessMeasurement:
    """MeasurementProcess's interface as measure/cli_jobs.py uses it; a job runs when it is submitted."""

    def __init__(self, on_event, on_notice=None, log_path=None, output="log", restart=True) -> None:
        self.on_event = on_event
        self._ids = itertools.count(1)
        self.server = JobServer(_Pipe(on_event))

    def start(self) -> None:
        pass

    def submit(self, kind: str, params: dict | None = None, what: str = "") -> int:
        job_id = next(self._ids)
        self.server.jobs.put(StartJob(job_id, kind, dict(params or {}), files_environ()))  # as the client sends it
        self.server.jobs.put(None)
        self.server.serve()  # runs the job, then ends at the None
        return job_id

    def cancel(self, job_id: int, grace_s=None, enforce: bool = True) -> None:
        pass

    def stop(self, grace_s: float = 1.5) -> None:
        pass

