"""The exporter: readings taken every interval (GPUs, host, the history's outcomes) served on /metrics.

`ExporterState.refresh()` takes a reading and builds the metric families; a scrape only hands out the families of
the last reading (`collect`), so however many scrapers ask and however slow NVML is, NVML is read once an interval
and a scrape never waits on it. `serve()` starts prometheus-client's HTTP server in a daemon thread on a registry
of our own (no process or GC metrics of this Python); its errors (a port in use, an address that is not this
machine's) are one TorchperfError line.

No torch and no textual here: this process holds NVML, psutil and the history reader, as the app's UI process does.
"""

from __future__ import annotations

import errno
import socket
import sys
import threading
from typing import Any, Callable, Iterable

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import GaugeMetricFamily, Metric

from torchperf_tui.engine.errors import TorchperfError
from torchperf_tui.engine.hardware.nvml import Nvml
from torchperf_tui.engine.hardware.telemetry import ALLOCATOR_ELSEWHERE, TelemetrySampler
from torchperf_tui.engine.records.history_file import HistoryFile
from torchperf_tui.exporter.gpu_metrics import GpuReader, gpu_families
from torchperf_tui.exporter.host_metrics import host_families, read_host
from torchperf_tui.exporter.outcomes import OutcomeReader

ERRORS_METRIC = "torchperf_exporter_reading_errors"


def _stderr(line: str) -> None:
    print(f"torchperf-tui exporter: warning: {line}", file=sys.stderr, flush=True)


class ExporterState:
    """What the exporter serves: the families of the last `refresh()`. A prometheus-client collector."""

    def __init__(self, nvml: Nvml, history: HistoryFile, hostname: str | None = None,
                 warn: Callable[[str], None] = _stderr) -> None:
        self.hostname = hostname or socket.gethostname()
        self.nvml = nvml
        self.warn = warn
        # The app's telemetry sampler, told that no allocator lives here: it never imports torch.
        self._sampler = TelemetrySampler(nvml=nvml, cuda=ALLOCATOR_ELSEWHERE, capacity=1)
        self._gpus = GpuReader(nvml, self.hostname)
        self.outcomes = OutcomeReader(history, warn)
        self._families: list[Metric] = []
        self._errors = 0
        self._lock = threading.Lock()  # one refresh at a time (the main loop; a test may call it too)

    def refresh(self, strict: bool = False) -> None:
        """Take a reading and swap in its families. Never raises for NVML or the history, except the history
        with `strict` (at start: an unreadable --history is bad input)."""
        with self._lock:
            self.outcomes.refresh(strict=strict)
            families: list[Metric] = []
            try:
                sample = self._sampler.sample()
                families += gpu_families(self.nvml, self._gpus.read(sample.gpus), self.hostname)
                families += host_families(read_host((sample.system_ram_used_bytes, sample.system_ram_total_bytes)),
                                          self.hostname)
            except Exception as exc:  # a bug or a library misbehaving: counted and said, the exporter serves on
                self._errors += 1
                self.warn(f"reading the GPUs and the host failed: {type(exc).__name__}: {exc}")
            families += self.outcomes.families()
            errors = GaugeMetricFamily(ERRORS_METRIC, "Readings that failed as a whole since the exporter started "
                                       "(one failing NVML query is not one: see torchperf_gpu_field_unavailable).",
                                       labels=("hostname",))
            errors.add_metric([self.hostname], self._errors)
            families.append(errors)
            self._families = families  # one assignment: a scrape sees the old list or the new, never half

    def collect(self) -> Iterable[Metric]:
        return list(self._families)


def serve(state: ExporterState, host: str, port: int) -> tuple[Any, threading.Thread]:
    """Serve `state` on http://host:port/metrics (port 0: a free port, read back from the server's
    `server_port`). TorchperfError, one line, when it cannot listen there."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(state)
    try:
        return start_http_server(port, addr=host, registry=registry)
    except socket.gaierror as exc:
        raise TorchperfError(f"--host {host!r}: not an address or a name this machine resolves ({exc.strerror})") \
            from None
    except OSError as exc:
        where = f"{host}:{port}"
        if exc.errno == errno.EADDRINUSE:
            raise TorchperfError(f"port {port} on {host} is in use (another exporter? dcgm-exporter's default is 9400 "
                                 "too): choose another with --port") from None
        if exc.errno in (errno.EACCES, errno.EPERM):
            raise TorchperfError(f"not allowed to listen on {where}: ports below 1024 need root; choose another "
                                 "with --port") from None
        if exc.errno == errno.EADDRNOTAVAIL:
            raise TorchperfError(f"--host {host}: not an address of this machine") from None
        raise TorchperfError(f"cannot listen on {where}: {exc.strerror or exc}") from None
