"""The CLI says the thread count a run used (never "flags defaults"), and what a model's code changed in
torch's global state."""

from __future__ import annotations

import json
import re

from tests.test_cli import run

TINY = "tests.tinymodels:tiny_cnn"
ARGS = ("--input", "1x3x16x16", "--warmup", "1", "--iters", "4", "--device", "cpu")


def _flags_row(out: str) -> str:
    return next(line for line in out.splitlines() if line.startswith("flags"))


def test_bench_of_a_plain_model_says_its_thread_count(capsys):
    code, out, _ = run(capsys, "bench", TINY, *ARGS)
    assert code == 0
    row = _flags_row(out)
    assert re.search(r"threads=\d+ \(default\)", row) and "defaults" not in row, row
    code, out, _ = run(capsys, "bench", TINY, *ARGS, "--json")
    data = json.loads(out)
    assert code == 0 and data["state_notes"] == [] and data["flags_in_effect"]["num_threads"] >= 1


def test_bench_of_a_model_whose_factory_sets_threads_says_so(capsys):
    code, out, _ = run(capsys, "bench", "tests.state_changing_models:factory_sets_threads", *ARGS)
    assert code == 0
    state = [line for line in out.splitlines() if line.startswith("torch state")]
    assert len(state) == 1 and "torch threads to" in state[0] and "factory" in state[0], out
    assert re.search(r"threads=\d+ \(default\)", _flags_row(out))
