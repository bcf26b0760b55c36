"""`torchperf-tui sweep`: its table and --json, an A/B's two curves, and bad input in one line with exit 2. The jobs
run in this process (tests/measure/in_process.py), as test_cli.py's do."""

import json

import pytest

from tests.cli_run import run

LLAMA = ["hf:llama", "--model-args", "num_hidden_layers=2,hidden_size=64,intermediate_size=128,num_attention_heads=4,"
         "num_key_value_heads=4,vocab_size=256,max_position_embeddings=64", "--device", "cpu"]


@pytest.fixture(autouse=True)
def _jobs_in_this_process(monkeypatch):
    from tests.measure.in_process import InProcessMeasurement

    monkeypatch.setattr("torchperf_tui.measure.cli_jobs.MeasurementProcess", InProcessMeasurement)


def test_a_sweep_prints_a_row_per_length_once(capsys):
    code, out, err = run(capsys, "sweep", *LLAMA, "--seq-lens", "16-128", "--iters", "3", "--warmup", "0")
    assert code == 0, err
    words = " ".join(out.split())  # Rich wraps a long heading
    assert "batch 1, sequence lengths 16-64" in words
    assert "threads=default" not in words and " (default)" in words  # the count said, as a run says it
    assert "length 128 past the model's maximum of 64 positions (max_position_embeddings): not run" in words
    lines = [line.split() for line in out.splitlines()]
    header = next(i for i, cells in enumerate(lines) if cells[:2] == ["length", "p50"])
    assert [cells[0] for cells in lines[header + 1:header + 4]] == ["16", "32", "64"]
    assert not [line for line in err.splitlines() if line.startswith("length")]  # off a terminal: the table only


def test_a_sweep_as_json_holds_every_point(capsys):
    code, out, _ = run(capsys, "sweep", *LLAMA, "--seq-lens", "32-64", "--iters", "2", "--warmup", "0", "--json",
                       "--batch", "3")
    assert code == 0
    data = json.loads(out)
    assert data["lengths"] == [32, 64] and data["batch"] == 3 and data["memory_kind"] == "rss"
    assert [(p["length"], p["fits"]) for p in data["points"]] == [(32, True), (64, True)]
    point = data["points"][1]
    assert point["tokens_per_s"] == pytest.approx(3 * 64 * 1000 / point["median_ms"])


def test_an_ab_sweep_gives_both_arms_curves(capsys):
    code, out, err = run(capsys, "sweep", *LLAMA, "--seq-lens", "16-32", "--iters", "2", "--warmup", "0",
                         "--a", "threads=1", "--b", "threads=1,deterministic_algorithms=on", "--json")
    assert code == 0, err
    data = json.loads(out)
    assert [arm["name"] for arm in data["arms"]] == ["A", "B"]
    assert sorted((p["arm"], p["length"]) for p in data["points"]) == [("A", 16), ("A", 32), ("B", 16), ("B", 32)]
    code, out, _ = run(capsys, "sweep", *LLAMA, "--seq-lens", "16-32", "--iters", "2", "--warmup", "0",
                       "--a", "threads=1", "--b", "threads=1,deterministic_algorithms=on")
    assert "A p50" in out and "B/A" in out and "arm B" in out


@pytest.mark.parametrize("args, message", [
    (["--seq-lens", "0-8"], "--seq-lens 0-8: sequence length 0: it must be at least 1"),
    (["--seq-lens", "512-128"], "--seq-lens 512-128: LO (512) is above HI (128)"),
    (["--a", "threads=1"], "an A/B sweep takes both --a and --b"),
    (["--a", "threads=1", "--b", "threads=1"], "arms A and B are the same flags"),
    (["--a", "shapes=random", "--b", "threads=1"], "leave shapes= out of the SPECs"),
])
def test_bad_input_is_one_line_and_exit_2(capsys, args, message):
    code, out, err = run(capsys, "sweep", *LLAMA, *args)
    assert code == 2 and out == ""
    assert message in err and len(err.strip().splitlines()) == 1


def test_a_model_that_takes_no_token_ids_is_refused_in_one_line(capsys):
    code, out, err = run(capsys, "sweep", "tests.tinymodels:tiny_cnn", "--device", "cpu")
    assert code == 2 and out == ""
    assert "not token ids" in err and len(err.strip().splitlines()) == 1
