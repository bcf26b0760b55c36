"""The CLI says a busy host under every measurement as `bench` does ('warning: ...' lines, per point where it has
points, and `disturbance_marks` in --json): roofline --layers, the timing modes, throughput, a sweep, the kernels'
A/B, the generation A/B; a quiet host under a high load average gets no warning; and a user model's example_inputs
are listed (name, shape, dtype) with no line saying an input shape was assumed. The jobs run in this process
(tests/measure/in_process.py), the host is a scripted reader (tests/engine/test_measured_conditions.py)."""

from __future__ import annotations

import json

import pytest

from tests.cli_run import run
from tests.engine.test_measured_conditions import BUSY, QUIET_LOAD, ScriptedHost
from torchperf_tui.engine.hardware.host_noise import HostProbe

TINY = ["tests.tinymodels:tiny_cnn", "--input", "1x3x8x8", "--device", "cpu"]
LLAMA_ARGS = ("num_hidden_layers=2,hidden_size=64,intermediate_size=128,num_attention_heads=4,num_key_value_heads=4,"
              "vocab_size=256,max_position_embeddings=64")
LLAMA = ["hf:llama", "--model-args", LLAMA_ARGS, "--device", "cpu"]
HOST = "noisy host: load 1.0 on 2 cores, other processes busy on 1.5 of them during"


@pytest.fixture(autouse=True)
def _jobs_in_this_process(monkeypatch, tmp_path):
    from tests.measure.in_process import InProcessMeasurement

    monkeypatch.setattr("torchperf_tui.measure.cli_jobs.MeasurementProcess", InProcessMeasurement)
    monkeypatch.setenv("TORCHPERF_HISTORY", str(tmp_path / "history.jsonl"))


@pytest.fixture
def host(monkeypatch):
    """host(other, load): every HostProbe of every measurement reads a ScriptedHost of its own."""

    def install(other: float, load: float) -> None:
        def probe(reader=None, during: str = "the timed run") -> HostProbe:
            return HostProbe(ScriptedHost(other, load), during=during)

        for module in ("measurements.timing", "analysis.layer_times", "measurements.timing_modes",
                       "measurements.batch_runner", "measurements.throughput", "measurements.sweep",
                       "measurements.generation_ab", "analysis.kernels", "hardware.host_noise"):
            monkeypatch.setattr(f"torchperf_tui.engine.{module}.HostProbe", probe)

    return install


def words(text: str) -> str:
    return " ".join(text.split())  # Rich wraps long rows to the console's width


def test_roofline_with_its_layers_warns_of_the_busy_host_of_the_run_and_of_the_layer_passes(capsys, host):
    host(BUSY, 1.0)
    code, out, err = run(capsys, "roofline", *TINY, "--iters", "4", "--layers", "--layer-iters", "2")
    assert code == 0, err
    assert f"warning {HOST} the timed run" in words(out)
    assert f"warning time per layer: {HOST} the passes timed per layer" in words(out)
    assert "host per layer load 1.0 on 2 cores, other processes busy on 1.5 of them" in words(out)
    code, out, _ = run(capsys, "roofline", *TINY, "--iters", "4", "--layers", "--layer-iters", "2", "--json")
    data = json.loads(out)
    assert len(data["disturbance_marks"]) == 2 and data["layer_times"]["host_noise"]["host_noisy"] is True


def test_the_timing_modes_warn_per_mode(capsys, host):
    host(BUSY, 1.0)
    code, out, err = run(capsys, "bench", *TINY, "--modes", "sync,pipelined", "--iters", "4", "--per-block", "2")
    assert code == 0, err
    for mode in ("sync", "pipelined"):
        assert f"warning: {mode}: {HOST} its shares of the rounds" in words(out)
    assert "(noisy host) every iteration synchronised" in words(out)  # the mode's row in the table
    code, out, _ = run(capsys, "bench", *TINY, "--modes", "sync,pipelined", "--iters", "4", "--per-block", "2",
                       "--json")
    data = json.loads(out)
    assert len(data["disturbance_marks"]) == 2 and all(m["disturbance_marks"] for m in data["modes"])


def test_a_throughput_search_warns_per_try_and_marks_each_try_line_and_row(capsys, host):
    host(BUSY, 1.0)
    code, out, err = run(capsys, "throughput", *TINY, "--max-batch", "2")
    assert code == 0, err
    tries = [line for line in err.splitlines() if line.startswith("batch")]
    assert len(tries) >= 3 and all(line.endswith(" · noisy host") for line in tries)  # each try, the measurement
    assert f"warning batch 1 (grow): {HOST} its timed iterations" in words(out)
    assert "the measurement at batch" in words(out) and "best, noisy host" in words(out)
    code, out, _ = run(capsys, "throughput", *TINY, "--max-batch", "2", "--json")
    data = json.loads(out)
    assert data["disturbance_marks"] and all(t["host_noise"]["host_noisy"] for t in data["tries"])


def test_a_sweep_warns_per_length(capsys, host):
    host(BUSY, 1.0)
    code, out, err = run(capsys, "sweep", *LLAMA, "--seq-lens", "8-16", "--iters", "2", "--warmup", "0")
    assert code == 0, err
    assert all(line.endswith(" · noisy host") for line in err.splitlines() if line.startswith("length"))
    for length in (8, 16):
        assert f"warning length {length}: {HOST} its timed blocks" in words(out)
    code, out, _ = run(capsys, "sweep", *LLAMA, "--seq-lens", "8-16", "--iters", "2", "--warmup", "0", "--json")
    assert [p["disturbance_marks"] != [] for p in json.loads(out)["points"]] == [True, True]


def test_the_kernels_ab_and_the_generation_ab_warn_as_an_ab_does(capsys, host):
    host(BUSY, 1.0)
    code, out, err = run(capsys, "compare", *TINY, "--kernels", "--a", "", "--b", "threads=1")
    assert code == 0, err
    assert f"warning: arm A: {HOST} its profiled passes" in words(out)
    code, out, err = run(capsys, "compare", *LLAMA, "--generate", "3", "--prompt-len", "8", "--a", "",
                         "--b", "threads=1", "--blocks", "6")
    assert code == 0, err
    assert f"warning {HOST} the blocks" in words(out)


def test_a_quiet_host_under_a_high_load_average_is_no_warning(capsys, host):
    host(0.0, QUIET_LOAD)
    code, out, err = run(capsys, "bench", *TINY, "--iters", "4", "--no-history")
    assert code == 0, err
    assert "load 8.4 on 2 cores, other processes busy on 0.0 of them" in words(out)  # said, as context
    assert "warning" not in out and "noisy" not in out
    code, out, err = run(capsys, "bench", *TINY, "--modes", "sync,pipelined", "--iters", "4", "--per-block", "2")
    assert code == 0, err
    assert "warning" not in out and "noisy" not in out


@pytest.mark.parametrize("command", ["flops", "bench"])
def test_a_factorys_example_inputs_are_listed_and_no_shape_is_said_to_be_assumed(capsys, command):
    extra = ["--iters", "3", "--no-history"] if command == "bench" else []
    code, out, err = run(capsys, command, "tests.tinymodels:keyword_inputs", "--batch", "2", *extra)
    assert code == 0, err
    assert "example_inputs at batch 2: input_ids 2x12 int64, attention_mask 2x12 int64" in words(out)
    assert "assumed" not in err and "does not say its input shape" not in err
    code, out, err = run(capsys, command, "tests.tinymodels:two_inputs", *extra)
    assert code == 0, err
    names = "image 1x3x8x8 float32, extra 1x5 float32" if command == "flops" else "arg0 1x3x8x8 float32, arg1 1x5 float32"
    assert f"example_inputs at batch 1: {names}" in words(out) and "assumed" not in err
    code, out, _ = run(capsys, command, "tests.tinymodels:keyword_inputs", *extra, "--json")
    data = json.loads(out)
    assert data["example_inputs"] is True and "input_ids 1x12 int64" in data["inputs"]


def test_a_factory_that_declares_no_input_and_makes_none_is_still_said_to_be_assumed(capsys):
    code, _, err = run(capsys, "flops", "tests.tinymodels:tiny_cnn")
    assert code == 0 and "assumed 3x224x224 without the batch" in err
