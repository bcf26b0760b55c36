"""`exporter`: serve GPU telemetry, the host and the history's latest outcomes for Prometheus until Ctrl-C.

Like the app's UI process this one never imports torch: it holds NVML, psutil, the history reader and the HTTP
server (exporter/server.py: prometheus-client's exposition on /metrics, 404 elsewhere). Bad input (a port in use, an unreadable --history) is one line and exit 2 before
anything is served; Ctrl-C or SIGTERM ends it with exit 0 and no traceback.
"""

from __future__ import annotations

import signal
import sys
import threading

from torchperf_tui.core.errors import PROG, TorchperfError
from torchperf_tui.engine.hardware.nvml import default_nvml
from torchperf_tui.engine.records.history_file import HistoryFile


def _say(line: str) -> None:
    print(f"{PROG} exporter: {line}", file=sys.stderr, flush=True)


def exporter_command(args) -> int:
    try:
        # prometheus-client: a dependency, but where it is missing the line below says what to do
        from torchperf_tui.exporter.server import ExporterState, serve
    except ImportError as exc:
        raise TorchperfError(f"the exporter needs prometheus-client ({exc}): pip install 'prometheus-client<1'") \
            from None
    stop = threading.Event()
    try:
        history = HistoryFile(args.history)
        state = ExporterState(default_nvml(), history)
        state.refresh(strict=True)  # the first reading before the first scrape; an unreadable history ends here
        server, thread = serve(state, args.host, args.port)
        try:
            gpus = state.nvml.device_count()
            what = f"{gpus} GPU(s)" if state.nvml.available else f"no GPU ({state.nvml.reason})"
            # Ctrl-C and `kill` end it, whatever SIGINT's state it inherited: a script's background job starts with
            # SIGINT ignored, and Python then never raises KeyboardInterrupt (it served on, past its Ctrl-C).
            previous = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGINT, signal.SIGTERM)}
            _say(f"serving http://{_url_host(args.host)}:{server.server_port}/metrics: {what}, the host, "
                 f"and the outcomes of {history.path} (every {args.interval:g} s; Ctrl-C ends it)")
            try:
                while not stop.wait(args.interval):
                    state.refresh()
            finally:
                for sig, handler in previous.items():
                    signal.signal(sig, handler)
        finally:
            server.shutdown()
            server.server_close()
            thread.join(timeout=5)
    except KeyboardInterrupt:
        pass
    _say("stopped")
    return 0


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host
