"""A history with a record of every kind and the hostile lines a travelled history may hold: for the tests of what
`history`, the exports and the app's History tab say each row is."""

from __future__ import annotations

import dataclasses
import json

from tests.records import ENV, make_record
from torchperf_tui.engine.records.history_file import HistoryFile

# Clears the screen, sets the title, breaks a line and a table, then a C1 CSI (red, where a terminal reads C1) and a
# right-to-left override (the rest shown backwards)
HOSTILE_MODEL = "evil\x1b[2J\x1b]0;owned\x07\nnext|line\x9b31m\u202eright"
DISTURBANCE = "noisy host: load 3.1 on 2 cores, other processes busy on 1.2 of them"
B_FLAGS = "cudnn.benchmark=on, tf32=on, threads=16 (default), matmul=high, sdpa=flash"


def every_kind() -> dict:
    """A disturbed timing run, an A/B's two arms, a generation and a run whose model's name is hostile, oldest first
    as the file holds them, by name."""
    timing = dataclasses.replace(make_record(10.0), disturbed=[DISTURBANCE])
    arm_a = make_record(11.0)
    arm_b = make_record(9.0)
    arm_a = dataclasses.replace(arm_a, kind="ab", details={"arm": "A", "pair": arm_b.id, "spec": "", "step": "infer"})
    arm_b = dataclasses.replace(arm_b, kind="ab", flags_text=B_FLAGS,
                                details={"arm": "B", "pair": arm_a.id, "spec": "cudnn_benchmark=on", "step": "infer"})
    generation = dataclasses.replace(
        make_record(12.0, model="hf:gpt2"), kind="generate", input_shape=(1, 128),
        details={"new_tokens": 64, "prompt_len": 128, "ttft_stats": {"p50_ms": 45.2}, "tokens_per_s": 81.3,
                 "kv_cache_bytes": 4_718_592, "model_args": "n_layer=2", "step": "infer", "source": "hf"})
    hostile = make_record(8.0, model=HOSTILE_MODEL, env={**ENV, "host\x1b[2J": "box\x1b]0;owned\x07"})
    return {"timing": timing, "arm_a": arm_a, "arm_b": arm_b, "generation": generation, "hostile": hostile}


def write_every_kind(path) -> dict:
    """every_kind()'s records written to the history at `path`, then two lines whose latencies are no measurement
    (a negative p50, a sample of 1e308 ms), which a reader skips with one warning line."""
    records = every_kind()
    HistoryFile(path).extend(records.values())
    negative = make_record(5.0).to_dict()
    negative["stats"]["p50_ms"] = -5.0
    absurd = make_record(5.0).to_dict()
    absurd["samples_ms"][0] = 1e308
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(negative) + "\n" + json.dumps(absurd) + "\n")
    return records
