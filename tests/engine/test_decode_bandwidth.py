"""The bandwidth of a generation's decode (engine/measurements/decode_bandwidth.py): the bytes a decode step reads
against a hand count (the parameters at their dtype, a tied weight once, and the KV cache at each step's position),
the bandwidth as those bytes over the per-token median under a fake clock, MBU against a fake kept copy ceiling looked
up under the run's thread count, and what is said without one. A 2-layer gpt2 on the CPU, a few tokens; every figure
checked exactly comes from the fake clock, so a busy host cannot move it."""

from __future__ import annotations

import json

import pytest
import torch

import torchperf_tui.engine.measurements.decode_bandwidth as decode_bandwidth
import torchperf_tui.engine.measurements.generation as generation
from torchperf_tui.engine.hardware.ceilings import Ceiling, CeilingsResult
from torchperf_tui.engine.measurements.bench_config import BenchConfig
from torchperf_tui.engine.measurements.decode_bandwidth import bandwidth_gbs, parameter_bytes
from torchperf_tui.engine.measurements.flags import Flags
from torchperf_tui.engine.workloads.model_args import parse_model_args
from torchperf_tui.wording.generation import NO_COPY_CEILING, bandwidth_line, generation_rows

LAYERS, EMBD, VOCAB, POSITIONS = 2, 32, 256, 64
TINY_GPT2 = parse_model_args(f"n_layer={LAYERS},n_embd={EMBD},n_head=2,vocab_size={VOCAB},n_positions={POSITIONS}")
PROMPT, NEW = 8, 5  # 4 decode steps, reading the cache at 9, 10, 11 and 12 positions
STEP_MS = 2.0  # what the fake clock says every prefill and decode step took


def gpt2_parameters() -> int:
    """GPT-2's parameters by hand: token and position embeddings, per block two layer norms, the attention's
    qkv and output projections and the MLP's two (each with its bias), the final layer norm; the LM head is the token
    embedding (tied), so not counted again."""
    e = EMBD
    block = 2 * (2 * e) + (e * 3 * e + 3 * e) + (e * e + e) + (e * 4 * e + 4 * e) + (4 * e * e + e)
    return VOCAB * e + POSITIONS * e + LAYERS * block + 2 * e


def kv_bytes(positions: int, itemsize: int = 4, batch: int = 1) -> int:
    """Keys and values of every layer: 2 x layers x batch x positions x n_embd (heads x head size) x itemsize."""
    return 2 * LAYERS * batch * positions * EMBD * itemsize


def config(**overrides) -> BenchConfig:
    values = dict(model="hf:gpt2", model_args=TINY_GPT2, device="cpu", seq_len=PROMPT, time_budget_s=None)
    return BenchConfig(**{**values, **overrides})


@pytest.fixture
def fake_clock(monkeypatch):
    """Every prefill and decode step takes STEP_MS by generation's clock (the step still runs)."""
    def sample(fn) -> float:
        fn()
        return STEP_MS

    monkeypatch.setattr(generation, "token_clock", lambda device: sample)


def kept_copy(bytes_per_s: float) -> CeilingsResult:
    copy = Ceiling(kind="copy", dtype="float32", value=bytes_per_s, size="256.0 MiB", median_s=0.1, reps=3,
                   workload="copy", threads=1)
    return CeilingsResult(device="cpu", key="fake cpu | threads 1", measured_at=0.0, ceilings=[copy])


def test_the_bytes_of_a_decode_step_are_the_parameters_once_and_the_kv_cache_at_its_position(fake_clock):
    result = generation.run_generation(config(), NEW, runs=1)
    reads = result.decode_bytes
    assert reads.weight_bytes == gpt2_parameters() * 4  # float32; the tied LM head once
    assert reads.steps == NEW - 1 and (reads.first_positions, reads.last_positions) == (PROMPT + 1, PROMPT + NEW - 1)
    assert reads.kv_first_bytes == kv_bytes(PROMPT + 1) and reads.kv_last_bytes == kv_bytes(PROMPT + NEW - 1)
    assert reads.kv_last_bytes == result.kv_cache_bytes  # the last step read the cache the generation ends with
    mean_positions = sum(range(PROMPT + 1, PROMPT + NEW)) / (NEW - 1)
    assert reads.kv_mean_bytes == kv_bytes(1) * mean_positions
    assert result.bytes_per_step == gpt2_parameters() * 4 + kv_bytes(1) * mean_positions
    assert (reads.first_step, reads.last_step) == (reads.weight_bytes + kv_bytes(9), reads.weight_bytes + kv_bytes(12))


def test_weights_and_cache_count_at_their_dtype_and_the_cache_at_the_batch(fake_clock):
    result = generation.run_generation(config(dtype="bfloat16", batch=2), NEW, runs=1)
    assert result.decode_bytes.weight_bytes == gpt2_parameters() * 2
    assert result.decode_bytes.kv_first_bytes == kv_bytes(PROMPT + 1, itemsize=2, batch=2)


def test_a_tied_weight_counts_once_and_an_untied_one_apiece():
    tied = torch.nn.Sequential(torch.nn.Embedding(10, 4), torch.nn.Linear(4, 10, bias=False))
    tied[1].weight = tied[0].weight
    assert parameter_bytes(tied) == 10 * 4 * 4
    untied = torch.nn.Sequential(torch.nn.Embedding(10, 4), torch.nn.Linear(4, 10, bias=False)).to(torch.float16)
    assert parameter_bytes(untied) == 2 * 10 * 4 * 2


def test_the_bandwidth_is_the_bytes_of_a_step_over_the_per_token_median(fake_clock):
    result = generation.run_generation(config(), NEW, runs=2)
    assert result.decode_stats.p50_ms == STEP_MS
    assert result.bandwidth_gbs == pytest.approx(result.bytes_per_step / (STEP_MS / 1000.0) / 1e9, rel=1e-12)
    assert bandwidth_gbs(3e9, 1000.0) == pytest.approx(3.0) and bandwidth_gbs(None, 1.0) is None
    assert bandwidth_gbs(1e9, 0.0) is None


def test_mbu_is_the_bandwidth_over_the_copy_ceiling_kept_under_the_runs_thread_count(fake_clock, monkeypatch):
    looked_up = []
    ceiling = {}

    def kept_for(device, on_corrupt=None):
        looked_up.append((device, torch.get_num_threads()))
        return kept_copy(ceiling["bytes_per_s"])

    # A ceiling 4x what the step reaches: the bytes a step reads over the fake step time, x 4.
    reads = generation.run_generation(config(), NEW, runs=1).decode_bytes
    ceiling["bytes_per_s"] = 4 * reads.per_step / (STEP_MS / 1000.0)
    monkeypatch.setattr(decode_bandwidth, "kept_for", kept_for)
    result = generation.run_generation(config(flags=Flags(num_threads=1)), NEW, runs=1)
    assert looked_up == [("cpu", 1)]  # the run's device, under its flags: a CPU's ceilings are kept per thread count
    assert result.mbu_pct == pytest.approx(25.0)
    assert result.copy_ceiling.bytes_per_s == ceiling["bytes_per_s"]
    assert result.copy_ceiling.key == "fake cpu | threads 1"
    rows = dict((label, value) for label, value, _ in generation_rows(result))
    assert rows["MBU"].startswith("25.0 % of the measured copy ceiling, ") and "copy 256.0 MiB, 1 thread" in rows["MBU"]
    assert "the bytes a large copy reads and writes a second, against the bytes a step reads" in rows["MBU"]
    assert bandwidth_line(result).endswith(f"MBU 25.0 % of the {ceiling['bytes_per_s'] / 1e9:,.1f} GB/s copy ceiling")


def test_a_bandwidth_above_the_copy_ceiling_is_said_as_the_ceiling_too_low_not_as_a_figure(fake_clock, monkeypatch):
    monkeypatch.setattr(decode_bandwidth, "kept_for", lambda device, on_corrupt=None: kept_copy(1e3))
    result = generation.run_generation(config(), NEW, runs=1)
    assert result.mbu_pct > 100 and result.to_dict()["mbu_above_ceiling"] is True
    rows = dict((label, value) for label, value, _ in generation_rows(result))
    assert rows["MBU"].startswith("above the measured copy ceiling (") and "measure again" in rows["MBU"]
    assert "MBU above the copy ceiling" in bandwidth_line(result)


def test_without_a_kept_ceiling_the_bandwidth_is_given_alone_and_the_ceiling_asked_for(fake_clock):
    result = generation.run_generation(config(), NEW, runs=1)  # the test's own ceilings file: none kept
    assert result.copy_ceiling is None and result.mbu_pct is None and result.bandwidth_gbs > 0
    rows = dict((label, value) for label, value, _ in generation_rows(result))
    assert rows["MBU"] == NO_COPY_CEILING == "no measured copy ceiling: measure it (C / torchperf-tui ceilings)"
    assert rows["bandwidth"].endswith(" GB/s (the bytes a step reads / the per-token median)")
    assert bandwidth_line(result).endswith(" GB/s · " + NO_COPY_CEILING)
    data = json.loads(json.dumps(result.to_dict()))
    assert data["mbu_pct"] is None and data["copy_ceiling"] is None and data["bandwidth_gbs"] > 0


def test_a_corrupt_ceilings_file_leaves_the_figures_and_says_why_there_is_no_mbu(fake_clock, tmp_path, monkeypatch):
    path = tmp_path / "corrupt.json"
    path.write_text("not json")
    monkeypatch.setenv("TORCHPERF_CEILINGS", str(path))
    result = generation.run_generation(config(), NEW, runs=1)
    assert result.bandwidth_gbs > 0 and result.copy_ceiling is None and "ceilings file" in result.copy_ceiling_problem
    rows = dict((label, value) for label, value, _ in generation_rows(result))
    assert rows["MBU"].startswith(NO_COPY_CEILING + " (") and "ceilings file" in rows["MBU"]


def test_the_json_and_the_history_record_carry_bytes_per_step_bandwidth_mbu_and_the_ceiling(fake_clock, monkeypatch):
    from torchperf_tui.engine.records.history_records import HistoryRecord
    from torchperf_tui.engine.records.result_records import records_of

    monkeypatch.setattr(decode_bandwidth, "kept_for", lambda device, on_corrupt=None: kept_copy(50e9))
    result = generation.run_generation(config(), NEW, runs=1)
    data = json.loads(json.dumps(result.to_dict()))
    assert data["bytes_per_step"] == result.bytes_per_step and data["bandwidth_gbs"] == result.bandwidth_gbs
    assert data["mbu_pct"] == pytest.approx(result.mbu_pct) and data["mbu_above_ceiling"] is False
    assert data["copy_ceiling_gbs"] == 50.0 and data["copy_ceiling"]["origin"] == "copy 256.0 MiB, 1 thread"
    assert data["decode_bytes"]["weight_bytes"] == gpt2_parameters() * 4
    assert data["decode_bytes"]["kv_last_bytes"] == kv_bytes(PROMPT + NEW - 1)
    [record] = records_of(result, fingerprint={"torch": "x"})
    details = HistoryRecord.from_dict(json.loads(json.dumps(record.to_dict()))).details
    assert details["bytes_per_step"] == result.bytes_per_step and details["bandwidth_gbs"] == result.bandwidth_gbs
    assert details["mbu_pct"] == pytest.approx(result.mbu_pct) and details["copy_ceiling"]["bytes_per_s"] == 50e9
    assert details["decode_bytes"]["steps"] == NEW - 1


def test_a_generation_ab_gives_each_arm_its_bytes_and_bandwidth_at_its_dtype(monkeypatch):
    import torchperf_tui.engine.measurements.generation_ab as generation_ab
    from torchperf_tui.engine.measurements.ab_arms import parse_arm_spec
    from torchperf_tui.wording.generation import generation_ab_rows

    def sample(fn) -> float:
        fn()
        return STEP_MS

    monkeypatch.setattr(generation_ab, "token_clock", lambda device: sample)
    arms = parse_arm_spec(""), parse_arm_spec("dtype=bfloat16")
    result = generation_ab.run_generation_ab(config(), *arms, 3, blocks=6)
    a, b = result.a, result.b
    assert a.decode_bytes.weight_bytes == gpt2_parameters() * 4 and b.decode_bytes.weight_bytes == gpt2_parameters() * 2
    assert a.bandwidth_gbs() == pytest.approx(a.decode_bytes.per_step / (STEP_MS / 1000.0) / 1e9)
    data = json.loads(json.dumps(result.to_dict()))
    assert data["b"]["bandwidth_gbs"] == pytest.approx(b.bandwidth_gbs()) and data["a"]["bytes_per_step"] > 0
    arms = [value for label, value, _ in generation_ab_rows(result) if label.startswith("arm ")]
    assert all(value.endswith(" GB/s") for value in arms), arms
