"""The headless CLI: readable output, --json, and one-line errors with exit code 2 for bad input."""

import json
import os

import pytest

from tests.cli_run import run
from torchperf_tui.entry import main

TINY = "tests.tinymodels:tiny_cnn"


@pytest.fixture
def in_process(monkeypatch):
    """The command's job runs in this process (tests/measure/in_process.py: the worker's own serve loop and runners,
    every message pickled as over the pipe), for a test that patches torch or the engine here, which a
    measurement process would not see."""
    from tests.measure.in_process import InProcessMeasurement

    monkeypatch.setattr("torchperf_tui.measure.cli_jobs.MeasurementProcess", InProcessMeasurement)


@pytest.fixture(autouse=True)
def _jobs_in_this_process(in_process):
    """These tests are about arguments, output and history: their jobs run here, saving the second or two a
    measurement process takes to start (about a hundred commands). tests/test_cli_process.py runs every
    command through a real one, and test_cli_hostile.py the model's code that needs one."""


def test_info_json_reports_cpu_and_why_cuda_is_missing(capsys):
    code, out, err = run(capsys, "info", "--json")
    assert code == 0
    data = json.loads(out)
    assert data["cpu"]["logical_cores"] >= 1
    assert data["torch_version"]
    if not data["cuda_available"]:
        assert data["cuda_reason"]


def test_info_readable(capsys):
    code, out, _ = run(capsys, "info")
    assert code == 0 and "CPU" in out and "torch" in out


def test_info_says_a_cpu_has_no_datasheet_peak_and_shows_the_measured_ceilings_once_kept(capsys):
    code, out, _ = run(capsys, "info")
    assert "no datasheet figure for a CPU: the measured ceilings stand in for them" in out
    assert "none measured yet: `torchperf-tui ceilings` measures them" in out
    from torchperf_tui.engine.hardware.ceilings import Ceiling, CeilingsResult, device_key, save_ceilings
    from torchperf_tui.engine.hardware.device_choice import resolve_device

    save_ceilings(CeilingsResult(device="cpu", key=device_key(resolve_device("cpu")), measured_at=0.0, ceilings=[
        Ceiling("matmul", "float32", 3.2e11, "2048x2048x2048", 0.05, 10),
        Ceiling("copy", "float32", 2.61e10, "256 MiB", 0.02, 10)]))
    code, out, _ = run(capsys, "info")
    assert "float32 matmul 0.32 TFLOP/s · copy 26.1 GB/s (measured " in out
    code, out, _ = run(capsys, "info", "--json")
    assert json.loads(out)["measured_ceilings"]["cpu"]["ceilings"][0]["value"] == 3.2e11


def test_models_lists_the_catalogue_by_task(capsys):
    code, out, _ = run(capsys, "models", "--task", "classification", "--json")
    assert code == 0
    names = {m["name"] for m in json.loads(out)}
    assert {"resnet18", "vit_b_16", "inception_v3"} <= names
    code, out, _ = run(capsys, "models")
    assert code == 0 and "resnet50" in out and "segmentation" in out


def test_flops_json_and_layers(capsys):
    code, out, _ = run(capsys, "flops", "resnet18", "--json")
    data = json.loads(out)
    assert code == 0 and data["params_total"] == 11_689_512 and "layers" not in data
    assert data["macs"] == pytest.approx(1.814e9, rel=0.01)
    code, out, _ = run(capsys, "flops", "resnet18", "--layers", "--batch", "2")
    assert code == 0 and "layer1.0.conv1" in out and "2x3x224x224" in out


def test_bench_readable_and_json(capsys):
    code, out, _ = run(capsys, "bench", TINY, "--input", "2x3x16x16", "--warmup", "1", "--iters", "5",
                       "--threads", "1")
    assert code == 0 and "p99" in out and "threads=1" in out
    code, out, _ = run(capsys, "bench", TINY, "--input", "1x3x16x16", "--warmup", "0", "--iters", "4",
                       "--json", "--samples", "--cudnn-benchmark", "--deterministic", "--channels-last")
    data = json.loads(out)
    assert code == 0 and len(data["samples_ms"]) == 4 and data["stats"]["n"] == 4
    assert data["flags"]["cudnn_benchmark"] and data["flags"]["cudnn_deterministic"]
    assert data["channels_last"] is True


@pytest.mark.parametrize("argv, message", [
    (["flops", "resnt18"], "did you mean resnet18"),
    (["bench", "resnet18", "--input", "1x3xab"], "malformed input shape"),
    (["flops", "resnet18", "--input", "1x5x224x224"], "rejects input 1x5x224x224"),
    (["bench", TINY, "--input", "1x5x8x8", "--iters", "1", "--warmup", "0"], "rejected input 1x5x8x8"),
    (["flops", "no_such_pkg.mod:factory"], "cannot import 'no_such_pkg.mod'"),
    (["bench", "resnet18", "--dtype", "int4"], "unknown dtype"),
    (["bench", "resnet18", "--iters", "0"], "--iters"),
    (["models", "--task", "nope"], "unknown task"),
])
def test_bad_input_is_one_line_and_exit_2(capsys, argv, message):
    code, out, err = run(capsys, *argv)
    assert code == 2
    assert message in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_cuda_on_a_cpu_box_is_exit_2(capsys, monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    code, _, err = run(capsys, "bench", TINY, "--device", "cuda")
    assert code == 2 and "no CUDA device" in err


def test_argparse_usage_errors_are_one_line(capsys):
    with pytest.raises(SystemExit) as info:
        main(["bench"])
    _, err = capsys.readouterr()
    assert info.value.code == 2 and err.count("\n") == 1


def test_python_dash_m_entry_point():
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "torchperf_tui", "--version"], capture_output=True, text=True)
    assert proc.returncode == 0 and "torchperf-tui" in proc.stdout


def test_bench_compile_failure_is_reported_with_eager_numbers(capsys, monkeypatch):
    import torch

    def broken_compile(model, **kwargs):
        def run(x):
            raise RuntimeError("unsupported op")
        return run

    monkeypatch.setattr(torch, "compile", broken_compile)
    code, out, _ = run(capsys, "bench", TINY, "--input", "1x3x8x8", "--iters", "2", "--warmup", "0", "--compile")
    assert code == 0 and "FAILED, eager numbers shown" in out and "unsupported op" in out and "p50" in out
    code, _, err = run(capsys, "bench", TINY, "--compile", "fastest")
    assert code == 2 and "unknown compile mode" in err


def test_bench_appends_to_history_and_history_export_read_it(capsys, tmp_path):
    history = str(tmp_path / "h.jsonl")
    for threads in ("1", "2"):
        code, _, _ = run(capsys, "--history", history, "bench", TINY, "--input", "1x3x8x8", "--warmup", "0",
                         "--iters", "3", "--threads", threads)
        assert code == 0
    code, out, _ = run(capsys, "--history", history, "history")
    assert code == 0 and out.count(TINY) == 2
    code, out, _ = run(capsys, "--history", history, "history", "--last", "1", "--json")
    records = json.loads(out)
    assert len(records) == 1 and records[0]["flags"]["num_threads"] == 2
    code, out, _ = run(capsys, "--history", history, "export", "--format", "csv")
    assert code == 0 and len(out.strip().splitlines()) == 3  # header + two runs
    target = tmp_path / "runs.md"
    code, _, err = run(capsys, "--history", history, "export", "--format", "md", "--output", str(target))
    assert code == 0 and "wrote 2 runs" in err and target.read_text().startswith("|")
    with open(history, "a") as fh:
        fh.write("{not json\n")
    code, out, err = run(capsys, "--history", history, "history")
    assert code == 0 and out.count(TINY) == 2 and "warning" in err and "skipped" in err


def test_history_after_the_command_is_the_file_it_reads_and_writes(capsys, tmp_path):
    """--history PATH after bench, history, export (and compare, why, exporter) as before the command; given in
    both places, the command's own counts."""
    history, elsewhere = str(tmp_path / "h.jsonl"), str(tmp_path / "elsewhere.jsonl")
    code, _, err = run(capsys, "--history", elsewhere, "bench", TINY, "--input", "1x3x8x8", "--warmup", "0",
                       "--iters", "3", "--history", history)
    assert code == 0 and not (tmp_path / "elsewhere.jsonl").exists(), err
    code, out, _ = run(capsys, "history", "--history", history)
    assert code == 0 and out.count(TINY) == 1
    code, out, _ = run(capsys, "history", "--changes", "--history", history)
    assert code == 0 and "1 record" in out and "too short to tell" in out
    code, out, _ = run(capsys, "export", "--format", "csv", "--history", history)
    assert code == 0 and len(out.strip().splitlines()) == 2  # header + the run
    code, _, err = run(capsys, "history", "--history", "/dev/zero")
    assert code == 2 and "not a regular file" in err and len(err.strip().splitlines()) == 1
    for command in ("compare", "why", "exporter"):
        code, out, _ = run(capsys, command, "--help")
        assert code == 0 and "--history PATH" in out, command


def test_no_history_flag_and_empty_history(capsys, tmp_path):
    history = str(tmp_path / "h.jsonl")
    run(capsys, "--history", history, "bench", TINY, "--input", "1x3x8x8", "--iters", "1", "--no-history")
    code, out, _ = run(capsys, "--history", history, "history")
    assert code == 0 and "no runs recorded yet" in out


def test_determinism_command(capsys):
    code, out, _ = run(capsys, "determinism", TINY, "--input", "1x3x8x8", "--json")
    data = json.loads(out)
    assert code == 0 and data["bitwise_equal"] is True and data["runs"] == 2
    code, out, _ = run(capsys, "determinism", TINY, "--input", "1x3x8x8")
    assert code == 0 and out.strip()


def test_throughput_command_finds_the_largest_batch_under_the_bound(capsys):
    code, out, err = run(capsys, "throughput", TINY, "--input", "1x3x8x8", "--max-batch", "8", "--to-oom",
                         "--json")
    data = json.loads(out)
    assert code == 0 and data["max_batch"] == 8 and data["hit_bound"] is True and data["to_oom"] is True
    assert data["samples_per_s"] > 0 and data["stop_rule"] == "max-batch"
    # without a latency budget the frontier is there too, in the keys of a search under one: a batch each, by batch
    frontier = data["frontier"]
    assert [p["batch"] for p in frontier] == [1, 2, 4, 8]
    assert all(p["p50_ms"] > 0 and p["items_per_s"] > 0 and p["n"] == 3 for p in frontier)
    assert [p["items_per_s"] for p in frontier] == [t["samples_per_s"] for t in data["points"]]
    code, out, err = run(capsys, "throughput", TINY, "--input", "1x3x8x8", "--max-batch", "8")
    assert code == 0
    for words in ("best throughput", "largest batch that fits", "stopped by", "search took"):
        assert words in out, words
    code, out, err = run(capsys, "throughput", "tests.tinymodels:oom_model", "--input", "1x3x8x8")
    last = err.strip().splitlines()[-1]  # after the tries' progress lines, one line says why
    assert code == 2 and last.startswith("torchperf-tui: error:") and "even batch 1 does not fit" in last


def test_throughput_under_a_latency_budget_gives_the_largest_batch_within_it_and_the_frontier(capsys):
    # p50 needs 9 passes a batch: a quick search on the tiny CNN, bounded at batch 4; each batch said as it is timed
    code, out, err = run(capsys, "throughput", TINY, "--input", "1x3x8x8", "--max-batch", "4", "--slo", "p50=5s")
    assert code == 0, err
    assert "batch 1 (grow): p50 " in err and " · meets, 9 passes" in err
    first = next(line for line in err.splitlines() if line.startswith("batch 1 (grow)"))
    assert first.count("p50") == 1 and "(CI " in first  # the median once: it is the quantile, with its interval
    assert "largest batch within it  batch 4: p50 " in out and "within 5.00 s" in out
    assert "the frontier: every batch timed" in out
    lines = out.splitlines()
    heading = lines[[i for i, line in enumerate(lines) if "the frontier: every batch timed" in line][0] + 1]
    assert heading.split() == ["batch", "p50", "items/s", "goodput/s", "passes", "verdict"]  # the quantile is p50
    code, out, err = run(capsys, "throughput", TINY, "--input", "1x3x8x8", "--max-batch", "4", "--slo", "p50=5s",
                         "--json")
    data = json.loads(out)
    assert code == 0 and data["chosen_batch"] == 4 and data["slo"] == {"quantile": 0.5, "name": "p50",
                                                                       "budget_ms": 5000.0}
    assert [p["batch"] for p in data["frontier"]] == [1, 2, 4] and all(p["n"] == 9 for p in data["frontier"])
    assert all(p["verdict"] == "meets" and p["quantile_supported"] for p in data["frontier"])
    # a budget no batch meets: none chosen, said why, exit 0 (an answer, not an error)
    code, out, err = run(capsys, "throughput", TINY, "--input", "1x3x8x8", "--slo", "p50=1us", "--json")
    data = json.loads(out)
    assert code == 0 and data["chosen_batch"] is None and data["stop_reason"].startswith("batch 1 misses it: p50 ")


@pytest.mark.parametrize("extra, words", [
    (("--slo", "p99"), "argument --slo: 'p99': write pQ=BUDGET with a unit, e.g. p99=20ms"),
    (("--slo", "p99=0ms"), "the budget must be above 0 and at most an hour"),
    (("--slo", "p99=20ms", "--to-oom"), "--to-oom goes with the search for the most samples/s, not with --slo"),
    (("--slo", "p99=20ms", "--mlflow", "file:///nonexistent"), "--mlflow goes with the search for the most")])
def test_a_latency_budget_typed_wrong_or_with_the_other_search_s_options_is_one_line(capsys, extra, words):
    code, _, err = run(capsys, "throughput", TINY, *extra)
    assert code == 2 and words in err and len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize("budget", ["-1", "nan", "inf", "1e9"])
def test_throughput_time_budget_is_checked_where_it_enters(capsys, budget):
    code, _, err = run(capsys, "throughput", TINY, "--time-budget", budget)
    assert code == 2 and "--time-budget" in err


def test_profile_command_lists_top_ops_and_writes_a_trace(capsys, tmp_path):
    trace = tmp_path / "trace.json"
    code, out, _ = run(capsys, "profile", TINY, "--input", "2x3x16x16", "--iters", "2", "--top", "5",
                       "--trace", str(trace))
    assert code == 0 and "convolution" in out and str(trace) in out
    assert json.loads(trace.read_text())["traceEvents"]
    code, _, err = run(capsys, "profile", TINY, "--sort", "speed")
    assert code == 2 and "unknown sort key" in err


def test_roofline_command_on_cpu_says_why_peaks_are_missing(capsys):
    code, out, _ = run(capsys, "roofline", TINY, "--input", "2x3x16x16", "--iters", "3", "--json")
    data = json.loads(out)
    assert code == 0 and data["flops"] > 0 and data["achieved_tflops"] > 0
    assert str(data["mfu_pct"]).startswith("n/a (")
    code, out, _ = run(capsys, "roofline", TINY, "--input", "2x3x16x16", "--iters", "3",
                       "--peak-tflops", "1.0", "--peak-bandwidth", "50")
    assert code == 0 and "side of the roofline" in out and ("memory" in out or "compute" in out)


def test_roofline_layers_time_each_layer_at_100_columns_and_say_each_reason_once(capsys, monkeypatch):
    from torchperf_tui.cli import render as cli_render

    monkeypatch.setattr(cli_render.console, "_width", 100)
    code, out, _ = run(capsys, "roofline", "resnet18", "--input", "1x3x32x32", "--iters", "3", "--layers",
                       "--layer-iters", "2")
    assert code == 0
    lines = out.splitlines()
    assert max(len(line.rstrip()) for line in lines) <= 100
    header = next(line for line in lines if line.startswith("layer "))
    for column in ("time", "% pass", "FLOP/s", "FLOP/B", "bound"):
        assert column in header
    assert "layer3.0.downsample.0" in out and "…" not in out  # whole names: none collapses
    assert "rest of the iteration" in out and "blocks' own code (a residual add" in out
    assert "pass " in out and "timed per layer (mean of 2)" in out and "the run's median is" in out
    # Each n/a's reason once, under the tables (the CPU has no peaks here): no row repeats it.
    assert out.count("FMA units per core") == 1 and out.count("n/a [") > 20
    rows = [line for line in lines if line.startswith(("conv1 ", "layer1.0.conv1 "))]
    assert len(rows) == 2 and all(" ms" in row or " µs" in row for row in rows)
    code, out, _ = run(capsys, "roofline", TINY, "--input", "1x3x16x16", "--iters", "3", "--layers",
                       "--layer-iters", "2", "--json")
    data = json.loads(out)
    times = data["layer_times"]
    assert code == 0 and times["iters"] == 2 and {m["name"] for m in times["modules"]} >= {"conv", "fc"}
    by_row = {layer["name"]: layer for layer in data["layers"]}
    assert by_row["conv"]["time_ms"] > 0 and by_row["conv"]["pass_pct"] > 0
    total = sum(l["time_ms"] for l in data["layers"] if isinstance(l["time_ms"], float))
    assert total + sum(data["time_outside"].values()) == pytest.approx(times["pass_ms"], rel=1e-6)


def test_compare_command_gives_a_verdict(capsys):
    code, out, _ = run(capsys, "compare", TINY, "--input", "1x3x16x16", "--a", "threads=1", "--b", "threads=2",
                       "--blocks", "6", "--per-block", "2", "--json")
    data = json.loads(out)
    assert code == 0 and data["verdict"]["blocks"] == 6
    assert data["a"]["flags"]["num_threads"] == 1 and data["b"]["flags"]["num_threads"] == 2
    assert data["summary"].startswith(("B is", "no significant difference"))
    # both arms are in the history, each pointing at the other and carrying the verdict
    code, out, _ = run(capsys, "history", "--json")
    arms = [r for r in json.loads(out) if r["kind"] == "ab"]
    assert [r["details"]["arm"] for r in arms] == ["A", "B"]
    assert arms[0]["details"]["pair"] == arms[1]["id"] and arms[1]["details"]["pair"] == arms[0]["id"]
    assert arms[1]["details"]["summary"] == data["summary"] and arms[1]["flags"]["num_threads"] == 2
    assert arms[0]["stats"]["n"] == 6 * 2
    code, out, _ = run(capsys, "compare", TINY, "--input", "1x3x16x16", "--a", "", "--b", "mkldnn=off",
                       "--blocks", "6", "--per-block", "2")
    assert code == 0 and "randomised blocks" in out and "Wilcoxon signed-rank" in out
    # 12 samples an arm support no p90 or p99: marked in the table, the mark explained under it
    table = out.split("\n\n")[0]
    assert table.count("s? ") + table.count("s?\n") == 4 and "? = more than the sample can support" in out


def test_bench_with_a_shape_schedule_reports_first_seen_shapes_and_tuning_cost(capsys):
    code, out, _ = run(capsys, "bench", TINY, "--input", "1x3x16x16", "--iters", "6", "--warmup", "1",
                       "--shapes", "cycle:3:8-24", "--no-history")
    assert code == 0 and "cycle:3:8-24: 3 distinct, 2 of 6 timed iterations met a new shape" in out
    assert "tuning cost" in out
    code, out, _ = run(capsys, "bench", TINY, "--input", "1x3x16x16", "--iters", "4", "--warmup", "1",
                       "--shapes", "random:8-24", "--no-history", "--json")
    data = json.loads(out)
    assert code == 0 and data["shapes"] == "random:8-24" and len(data["sample_first_seen"]) == 4
    assert data["shape_report"]["distinct"] >= 2


@pytest.mark.parametrize("args, message", [
    (("--shapes", "cycle:x"), "K must be a whole number"),
    (("--input", "1x3x16x16", "--shapes", "random:12-16"), "rejects input 1x3x12x12"),
])
def test_bench_bad_shape_schedules_exit_2(capsys, args, message):
    code, _, err = run(capsys, "bench", "tests.tinymodels:fixed_size", "--iters", "2", "--no-history", *args)
    assert code == 2 and message in err and err.count("\n") == 1


@pytest.mark.parametrize("spec, message", [("benchmark=maybe", "expected on/off"), ("speed=1", "unknown key"),
                                           ("shapes=sometimes", "unknown shape schedule")])
def test_compare_bad_specs_exit_2(capsys, spec, message):
    code, _, err = run(capsys, "compare", TINY, "--a", "", "--b", spec)
    assert code == 2 and message in err and err.count("\n") == 1


def test_compare_with_a_shape_schedule_the_model_rejects_exits_2_before_running(capsys):
    code, out, err = run(capsys, "compare", "tests.tinymodels:fixed_size", "--input", "1x3x16x16", "--a", "",
                         "--b", "shapes=random:12-16")
    assert code == 2 and out == "" and "rejects input 1x3x12x12" in err and err.count("\n") == 1


def test_memsnap_on_a_cpu_box_is_one_line_and_exit_2(capsys):
    code, out, err = run(capsys, "memsnap", TINY, "--device", "cpu")
    assert code == 2 and out == "" and "needs a CUDA device" in err and err.count("\n") == 1


@pytest.mark.gpu
def test_memsnap_on_cuda_writes_the_snapshot_it_announces(capsys, tmp_path):
    code, out, _ = run(capsys, "memsnap", TINY, "--input", "2x3x32x32", "--out", str(tmp_path), "--json")
    data = json.loads(out)
    assert code == 0 and data["path"].startswith(str(tmp_path)) and os.path.getsize(data["path"]) > 0


def test_compare_kernels_shows_each_conv_layer_under_both_arms(capsys):
    code, out, _ = run(capsys, "compare", TINY, "--input", "2x3x16x16", "--a", "", "--b", "mkldnn=off", "--kernels")
    assert code == 0 and "conv" in out and "mkldnn_convolution" in out
    assert "1 of 1 conv layers changed" in out and "GPU view" in out
    code, out, _ = run(capsys, "compare", TINY, "--input", "2x3x16x16", "--a", "", "--b", "mkldnn=off", "--kernels",
                       "--json")
    data = json.loads(out)
    assert code == 0 and data["kind"] == "cpu-op" and data["layers"][0]["changed"] is True


def test_a_cuda_flag_on_the_cpu_is_called_out_not_silently_ignored(capsys):
    code, out, _ = run(capsys, "compare", TINY, "--input", "1x3x8x8", "--a", "", "--b", "cudnn_benchmark=on",
                       "--blocks", "6", "--per-block", "1", "--json", "--no-history")
    assert code == 0 and any("cudnn.benchmark has no effect here" in note for note in json.loads(out)["notes"])
    code, _, err = run(capsys, "bench", TINY, "--input", "1x3x8x8", "--iters", "2", "--cudnn-benchmark", "--no-history")
    assert code == 0 and "note: cudnn.benchmark has no effect here" in err


def test_compare_kernels_with_a_shape_schedule_is_refused(capsys):
    code, out, err = run(capsys, "compare", TINY, "--a", "", "--b", "shapes=cycle:2", "--kernels")
    assert code == 2 and out == "" and "--kernels profiles one input shape" in err


def test_bench_on_a_gpu_says_the_clocks_throttling_and_energy_per_inference(capsys, fake_gpu_conditions):
    # The fake NVML reads 1 J per window and a power cap under one thread (tests/conftest.py).
    code, out, _ = run(capsys, "bench", TINY, "--input", "2x3x16x16", "--warmup", "1", "--iters", "5",
                       "--threads", "1", "--no-history")
    assert code == 0
    assert "GPU during the run" in out and "THROTTLED 100 %: power cap (software)" in out
    assert "throttling" in out and "throttled: power cap (software) in 100 % of 2 readings" in out
    assert "100 mJ per inference (10 inferences per J; NVML energy counter" in out
    code, out, _ = run(capsys, "bench", TINY, "--input", "2x3x16x16", "--warmup", "1", "--iters", "5",
                       "--no-history", "--json")
    conditions = json.loads(out)["conditions"]
    assert conditions["energy_per_item_j"] == pytest.approx(0.1) and conditions["items"] == 10


def test_compare_says_each_arms_gpu_and_notes_the_arm_that_throttled(capsys, fake_gpu_conditions):
    code, out, _ = run(capsys, "compare", TINY, "--input", "1x3x8x8", "--a", "threads=2", "--b", "threads=1",
                       "--blocks", "6", "--per-block", "2", "--no-history")
    assert code == 0
    assert "GPU during A's blocks:" in out and "not throttled" in out
    assert "GPU during B's blocks:" in out and "THROTTLED 100 %: power cap (software)" in out
    assert "note: B ran throttled more than A" in out


def test_the_app_without_a_terminal_is_refused_in_one_line_not_started(capsys):
    # Started with its output in a file, the app drew escape codes into it at full speed and never saw a key.
    code, out, err = run(capsys, "--device", "cpu")  # under pytest, stdin and stdout are not terminals
    assert code == 2 and out == ""
    assert err.strip().splitlines() == [
        "torchperf-tui: error: the app needs a terminal, and its stdin is not one: run it in one (over SSH: ssh -t), "
        "or use a command for scripts (e.g. torchperf-tui bench MODEL)"]


def test_bench_json_and_the_history_record_carry_the_host_noise_and_its_marks(capsys, tmp_path):
    history = tmp_path / "noise.jsonl"
    code, out, _ = run(capsys, "--history", str(history), "bench", TINY, "--input", "1x3x16x16", "--warmup", "1",
                       "--iters", "20", "--json")
    data = json.loads(out)
    noise = data["host_noise"]
    assert code == 0 and noise["cores"] >= 1 and noise["samples"] == 20 and noise["window_s"] > 0
    assert {"load", "other_busy_cores", "p50_over_min", "slow_share", "host_noisy", "samples_noisy"} <= set(noise)
    assert noise["p50_over_min"] >= 1.0  # 20 samples: their spread is said
    assert data["disturbance_marks"] == noise["warnings"]  # the CLI saw no resize: only the host's findings
    record = json.loads(history.read_text().splitlines()[-1])
    assert record.get("disturbed", []) == noise["warnings"] and record["details"]["host_noise"]["samples"] == 20
    code, out, _ = run(capsys, "bench", TINY, "--input", "1x3x16x16", "--warmup", "1", "--iters", "3", "--no-history")
    assert code == 0 and "host " in out and " cores" in out  # the figures, in the readable table too


def test_a_row_that_quotes_an_error_is_printed_as_text_not_markup():
    """A compile error can quote a path ('[/usr/bin/cc]'): Rich read it as a closing tag and the whole table failed."""
    from torchperf_tui.cli import render as cli_render

    with cli_render.console.capture() as captured:
        cli_render.print_kv("run", [("torch.compile", "FAILED, eager numbers shown: call to [/usr/bin/cc] failed: a[i]",
                                     "warning")])
    assert "FAILED, eager numbers shown: call to [/usr/bin/cc] failed: a[i]" in captured.get()


def test_the_app_takes_the_pickers_args_and_seq_and_a_transformers_demo_its_small_config(capsys, monkeypatch):
    from torchperf_tui.app import factory, launch
    from torchperf_tui.app.demo_attention import SMALL_CONFIGS

    started = {}

    class NotStarted:  # the app as constructed, not run (no terminal under pytest)
        def __init__(self, **options):
            started.update(options)
            self.return_code = 0

        def run(self):
            pass

    monkeypatch.setattr(factory, "TorchperfApp", NotStarted)
    monkeypatch.setattr(launch, "terminal_missing", lambda: "")
    assert run(capsys, "--model", "hf:gpt2", "--model-args", "n_layer=2", "--seq-len", "64")[0] == 0
    assert (started["model"], started["model_args"], started["seq_len"]) == ("hf:gpt2", "n_layer=2", "64")
    assert run(capsys, "--demo", "hf:llama")[0] == 0
    assert (started["model_args"], started["seq_len"], started["demo"]) == (SMALL_CONFIGS["hf:llama"], "1024", True)
    code, out, err = run(capsys, "--model-args", "n_layer", "--seq-len", "64")
    assert code == 2 and len(err.strip().splitlines()) == 1 and "is not KEY=VALUE" in err
    code, out, err = run(capsys, "--seq-len", "0")
    assert code == 2 and len(err.strip().splitlines()) == 1 and "sequence length" in err
