"""The exporter: readings taken every interval (GPUs, host, the history's outcomes) served on /metrics.

`ExporterState.refresh()` takes a reading and builds the metric families; a scrape only hands out the families of
the last reading (`collect`), so however many scrapers ask and however slow NVML is, NVML is read once an interval
and a scrape never waits on it. `serve()` starts an HTTP server in a daemon thread on a registry of our own (no
process or GC metrics of this Python); its errors (a port in use, an address that is not this machine's) are one
TorchperfError line.

The server is prometheus-client's exposition (`make_wsgi_app`: content negotiation, gzip) on
`/metrics` only, behind wsgiref's threaded server as prometheus-client's own `start_http_server` is, with three
changes that its defaults lacked: a listen backlog of LISTEN_BACKLOG, not 5 (of 200 scrapes at once 54 timed out);
a read timeout per connection, so a client that sends half a request and waits is closed instead of holding a thread
for ever; and every other path answers 404 (`/` a pointer to /metrics), not the metrics.

No torch and no textual here: this process holds NVML, psutil and the history reader, as the app's UI process does.
"""

from __future__ import annotations

import errno
import socket
import sys
import threading
from typing import Any, Callable, Iterable

from wsgiref.simple_server import WSGIRequestHandler, make_server

from prometheus_client import CollectorRegistry, make_wsgi_app
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.exposition import ThreadingWSGIServer

from torchperf_tui.core.errors import TorchperfError
from torchperf_tui.engine.hardware.nvml import Nvml
from torchperf_tui.engine.hardware.telemetry import ALLOCATOR_ELSEWHERE, TelemetrySampler
from torchperf_tui.engine.records.history_file import HistoryFile
from torchperf_tui.exporter.gpu_metrics import GpuReader, gpu_families
from torchperf_tui.exporter.host_metrics import host_families, read_host
from torchperf_tui.exporter.outcomes import OutcomeReader

ERRORS_METRIC = "torchperf_exporter_reading_errors"
# Connections the kernel queues before the server accepts them: enough for a burst of scrapers (Linux caps it at
# net.core.somaxconn, 4096 on current kernels).
LISTEN_BACKLOG = 1024
# Seconds the server waits for each read of a request: a scraper sends its few hundred bytes at once.
READ_TIMEOUT_S = 10.0
METRICS_PATH = "/metrics"
INDEX_TEXT = (b"torchperf-tui exporter: the metrics are at /metrics (GPU telemetry with DCGM exporter's names, the "
              b"host, and the history's latest outcomes).\n")


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


class _Handler(WSGIRequestHandler):
    """wsgiref's handler, silent, that closes a connection whose request does not arrive within `timeout`."""

    timeout = READ_TIMEOUT_S  # socketserver's StreamRequestHandler sets it on the connection

    def handle(self) -> None:
        try:
            super().handle()
        except (TimeoutError, ConnectionError):  # half a request, or a client gone: the connection just ends
            self.close_connection = True

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        """No line per request."""


class _Server(ThreadingWSGIServer):
    """A thread per connection (daemon threads: Ctrl-C never waits on a scraper), a listen backlog for bursts."""

    request_queue_size = LISTEN_BACKLOG


def _routes(metrics_app):
    """/metrics: the exposition (GET; OPTIONS and 405 as prometheus-client answers them); /: a line saying where the
    metrics are (GET, HEAD); anything else 404."""
    def app(environ, start_response):
        path = environ.get("PATH_INFO", "")
        if path == METRICS_PATH:
            return metrics_app(environ, start_response)
        if path == "/" and environ["REQUEST_METHOD"] in ("GET", "HEAD"):
            start_response("200 OK", [("Content-Type", "text/plain; charset=utf-8"),
                                      ("Content-Length", str(len(INDEX_TEXT)))])
            return [INDEX_TEXT if environ["REQUEST_METHOD"] == "GET" else b""]
        if path == "/":
            start_response("405 Method Not Allowed", [("Allow", "GET, HEAD"), ("Content-Length", "0")])
            return [b""]
        body = f"not found: the metrics are at {METRICS_PATH}\n".encode()
        start_response("404 Not Found", [("Content-Type", "text/plain; charset=utf-8"),
                                         ("Content-Length", str(len(body)))])
        return [body]

    return app


def serve(state: ExporterState, host: str, port: int, *,
          read_timeout_s: float = READ_TIMEOUT_S) -> tuple[Any, threading.Thread]:
    """Serve `state` on http://host:port/metrics (port 0: a free port, read back from the server's
    `server_port`); a connection whose request has not arrived within `read_timeout_s` of its last byte is closed.
    TorchperfError, one line, when it cannot listen there."""
    server = make_exporter_server(state, host, port, read_timeout_s=read_timeout_s)
    thread = threading.Thread(target=server.serve_forever, name="exporter-http", daemon=True)
    thread.start()
    return server, thread


def make_exporter_server(state: ExporterState, host: str, port: int, *,
                         read_timeout_s: float = READ_TIMEOUT_S) -> ThreadingWSGIServer:
    """The server `serve` runs, listening but not yet answering (its `serve_forever` does)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(state)
    handler = type("Handler", (_Handler,), {"timeout": read_timeout_s})
    try:
        family, address = _family(host, port)
        server_class = type("Server", (_Server,), {"address_family": family})
        return make_server(address, port, _routes(make_wsgi_app(registry)), server_class, handler_class=handler)
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


def _family(host: str, port: int) -> tuple[socket.AddressFamily, str]:
    """The address family and address to bind `host` with (IPv6 for '::'), as prometheus-client chooses them."""
    family, _, _, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
    return family, address[0]
