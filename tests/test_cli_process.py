"""Every CLI command that runs a model or measures does it in a measurement process of its own, as the app does
(measure/cli_jobs.py): here each goes through a real one, and its result reaches the command whole. (tests/test_cli.py
runs its many argument and output cases with the jobs in its own process; test_cli_hostile.py has the model code
that only a process of its own survives.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.test_cli import TINY, run
from torchperf_tui.measure import cli_jobs


@pytest.fixture
def processes(monkeypatch):
    """The pids of the measurement processes the commands start, as each says it is ready."""
    from torchperf_tui.measure.client import MeasurementProcess

    pids: list[int] = []

    class Watched(MeasurementProcess):
        def start(self) -> None:
            super().start()
            pids.append(self._process.pid)

    monkeypatch.setattr(cli_jobs, "MeasurementProcess", Watched)
    return pids


@pytest.mark.parametrize("argv, check", [
    (["bench", TINY, "--input", "1x3x8x8", "--warmup", "1", "--iters", "4", "--json", "--samples"],
     lambda data: len(data["samples_ms"]) == 4),
    (["bench", TINY, "--input", "1x3x8x8", "--iters", "2", "--modes", "sync,pipelined", "--per-block", "2",
      "--json"], lambda data: [m["mode"] for m in data["modes"]] == ["sync", "pipelined"]),
    (["flops", TINY, "--input", "1x3x8x8", "--layers", "--json"], lambda data: data["layers"]),
    (["throughput", TINY, "--input", "1x3x8x8", "--max-batch", "4", "--json"], lambda data: data["max_batch"] == 4),
    (["profile", TINY, "--input", "1x3x8x8", "--iters", "1", "--json"], lambda data: data["ops"]),
    (["roofline", TINY, "--input", "1x3x8x8", "--iters", "3", "--peak-tflops", "1", "--json"],
     lambda data: data["flops"] > 0 and data["mfu_pct"] > 0),
    (["compare", TINY, "--input", "1x3x8x8", "--a", "threads=1", "--b", "dtype=bfloat16", "--blocks", "6",
      "--per-block", "1", "--json"], lambda data: data["verdict"]["blocks"] == 6),
    (["compare", TINY, "--input", "2x3x16x16", "--a", "", "--b", "mkldnn=off", "--kernels", "--json"],
     lambda data: data["layers"][0]["changed"] is True),
    (["determinism", TINY, "--input", "1x3x8x8", "--runs", "3", "--json"], lambda data: data["runs"] == 3),
], ids=["bench", "modes", "flops", "throughput", "profile", "roofline", "compare", "kernels", "determinism"])
def test_each_command_runs_its_job_in_a_measurement_process(capsys, processes, argv, check):
    code, out, err = run(capsys, *argv)
    assert code == 0, err
    assert check(json.loads(out))
    assert len(processes) == 1 and processes[0] != os.getpid()


def test_a_timed_run_keeps_the_fingerprint_the_measurement_process_saw(capsys, processes):
    code, _, _ = run(capsys, "bench", TINY, "--input", "1x3x8x8", "--warmup", "0", "--iters", "2")
    code, out, _ = run(capsys, "history", "--json")
    record = json.loads(out)[-1]
    assert code == 0 and record["fingerprint"]["torch"] and len(processes) == 1  # history: read here, no process


def test_the_cli_process_never_imports_torch_for_a_command_that_measures(tmp_path):
    script = ("import sys\nfrom torchperf_tui.entry import main\n"
              f"code = main(['bench', {TINY!r}, '--input', '1x3x8x8', '--iters', '2', '--no-history', '--json'])\n"
              "print('torch' in sys.modules, code, file=sys.stderr)\n")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=180)
    assert proc.stderr.strip().splitlines()[-1] == "False 0", proc.stderr
    assert json.loads(proc.stdout)["stats"]["n"] == 2


def test_a_failed_job_is_the_engines_line_or_a_bug_said_as_one():
    with pytest.raises(cli_jobs.JobError, match="rejected input 1x5x8x8"):
        cli_jobs.run_job("time", {"cfg": _cfg(input_shape=(1, 5, 8, 8))})
    with pytest.raises(cli_jobs.MeasurementBug, match="^KeyError: 'dtype'$"):  # params a runner cannot take
        cli_jobs.run_job("analyse", {"model": TINY, "layers": False, "step": "infer"})


def _cfg(**kw):
    from torchperf_tui.engine.measurements.bench_config import BenchConfig

    return BenchConfig(**{**dict(model=TINY, input_shape=(1, 3, 8, 8), warmup=0, iters=2, device="cpu"), **kw})


def test_a_module_that_sets_threads_at_import_is_said_and_the_run_keeps_the_process_own_count():
    """The model's job is the CLI process's first: what its module sets at import must not become the baseline."""
    import re

    from tests.test_cli_hostile import _cli

    proc = _cli("bench", "tests.import_sets_threads:factory", "--input", "1x3x8x8", "--iters", "3", "--warmup", "1",
                "--no-history")
    assert proc.returncode == 0, proc.stderr
    note = re.search(r"the model's module tests\.import_sets_threads set torch threads to (\d+) at import: "
                     r"put back to (\d+) for the job", " ".join(proc.stdout.split()))  # a row may wrap
    assert note is not None, proc.stdout
    set_to, own = note.groups()
    assert set_to != own
    flags = next(line for line in proc.stdout.splitlines() if line.startswith("flags"))
    assert flags.split(maxsplit=1)[1].strip() == f"threads={own} (default)"
