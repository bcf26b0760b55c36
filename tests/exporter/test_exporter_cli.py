"""`torchperf-tui exporter` as an operator runs it: a process of its own that never imports torch, ended by
Ctrl-C with exit 0; bad input refused in one line with exit 2 before anything is served."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time

import pytest

from tests.exporter.helpers import record, scrape, value, write_history
from torchperf_tui.entry import main
from torchperf_tui.core.errors import TorchperfError
from torchperf_tui.engine.records.history_file import HistoryFile
from torchperf_tui.exporter.server import ExporterState, serve

# The CLI's own entry point, with a line at exit saying whether torch (or the other heavy libraries) were imported.
PROBE = ("import atexit, sys\n"
         "atexit.register(lambda: print('heavy imported:', sorted(m for m in ('torch', 'torchvision', 'timm', "
         "'transformers', 'textual') if m in sys.modules), file=sys.stderr, flush=True))\n"
         "from torchperf_tui.entry import main\n"
         "raise SystemExit(main())\n")


def _start(*argv: str, sigint_ignored: bool = False) -> subprocess.Popen:
    # faulthandler: a process that does not end when told is made to say where each of its threads stands
    return subprocess.Popen([sys.executable, "-X", "faulthandler", "-c", PROBE, *argv], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=dict(os.environ),
                            preexec_fn=(lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)) if sigint_ignored
                            else None)


def _ended(process: subprocess.Popen, timeout: float) -> tuple[str, str]:
    """Its stdout and stderr once it has ended; past `timeout`, its threads' stacks (SIGABRT to faulthandler) in the
    failure, so a hang under load says where it hung."""
    try:
        return process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGABRT)
        out, err = process.communicate(timeout=30)
        pytest.fail(f"the exporter did not end within {timeout:g} s of its signal; where its threads stood:\n{err}")


def _serving_url(process: subprocess.Popen) -> str:
    line = process.stderr.readline()  # the exporter's first line says where it serves
    found = re.search(r"serving (http://127\.0\.0\.1:\d+/metrics)", line)
    assert found, line
    return found.group(1)


def test_the_exporter_process_serves_without_torch_and_ctrl_c_ends_it_cleanly(tmp_path):
    history = tmp_path / "history.jsonl"
    write_history(history, record("resnet18", 10.0))
    process = _start("exporter", "--history", str(history), "--port", "0", "--interval", "0.1")
    try:
        url = _serving_url(process)
        samples = scrape(url)
        assert value(samples, "torchperf_outcome_latency_seconds", model="resnet18", quantile="0.5") == 0.010
        assert "torchperf_nvml_available" in samples and "torchperf_host_cpu_count" in samples
        write_history(history, record("resnet50", 20.0))  # a run saved while it serves: on the next reading
        deadline = time.monotonic() + 60  # a reading every 0.1 s; a busy CI box can stall one for seconds
        while "resnet50" not in {s.labels.get("model") for s in scrape(url).get(
                "torchperf_outcome_latency_seconds", [])}:
            assert time.monotonic() < deadline, "the new record never reached /metrics"
            time.sleep(0.1)
        process.send_signal(signal.SIGINT)
        out, err = _ended(process, timeout=20)
    finally:
        process.kill()
    assert process.returncode == 0, err
    assert "Traceback" not in err and "stopped" in err
    assert "heavy imported: []" in err, err
    assert out == ""


def _port_in_use():
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    return holder


def test_a_port_in_use_is_one_line_and_exit_2(tmp_path, capsys):
    with _port_in_use() as holder:
        port = holder.getsockname()[1]
        state = ExporterState(_no_gpu(), HistoryFile(tmp_path / "h.jsonl"), hostname="box-a")
        with pytest.raises(TorchperfError, match=f"port {port} on 127.0.0.1 is in use"):
            serve(state, "127.0.0.1", port)
        assert main(["--history", str(tmp_path / "h.jsonl"), "exporter", "--port", str(port)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"error: port {port} on 127.0.0.1 is in use" in err, err


def _no_gpu():
    from tests.fakes.fake_nvml import NVML_ERROR_LIBRARY_NOT_FOUND, FakeNvml
    from torchperf_tui.engine.hardware.nvml import Nvml

    fake = FakeNvml()
    fake.fail_init(NVML_ERROR_LIBRARY_NOT_FOUND)
    return Nvml.open(module=fake)


@pytest.mark.parametrize("argv, words", [
    (["exporter", "--port", "-1"], "--port: must be at least 0"),
    (["exporter", "--port", "65536"], "--port: must be at most 65535"),
    (["exporter", "--port", "http"], "--port: expected a whole number"),
    (["exporter", "--interval", "nan"], "interval: expected a finite number"),
    (["exporter", "--interval", "-1"], "interval: must be >= 0.1"),
    (["exporter", "--interval", "0"], "interval: must be >= 0.1"),
    (["exporter", "--interval", "1e9"], "interval: must be <= 60"),
    (["exporter", "--history", "/"], "will not use /: it is a directory"),
    (["exporter", "--host", "no-such-host.invalid", "--port", "0"], "--host 'no-such-host.invalid'"),
])
def test_bad_input_is_one_line_and_exit_2(argv, words, capsys, tmp_path):
    if "--history" not in argv:
        argv = ["--history", str(tmp_path / "h.jsonl"), *argv]
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's refusals exit from the parser
        code = exc.code
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.count("\n") == 1 and words in err, err


@pytest.mark.parametrize("sig, sigint_ignored", [(signal.SIGTERM, False), (signal.SIGINT, True)],
                         ids=["sigterm", "ctrl-c-with-sigint-ignored"])
def test_sigterm_and_ctrl_c_end_it_cleanly_whatever_sigint_state_it_inherited(tmp_path, sig, sigint_ignored):
    """`kill` (systemd's stop, a container's end) is a clean stop too: exit 0, no traceback. And Ctrl-C ends it when
    it started with SIGINT ignored, as a script's background job (and the suite run in one) does: it served on past
    its Ctrl-C until the exporter handled SIGINT itself."""
    process = _start("exporter", "--history", str(tmp_path / "h.jsonl"), "--port", "0", sigint_ignored=sigint_ignored)
    try:
        scrape(_serving_url(process))
        process.send_signal(sig)
        _, err = _ended(process, timeout=20)
    finally:
        process.kill()
    assert process.returncode == 0 and "Traceback" not in err and "stopped" in err, err
