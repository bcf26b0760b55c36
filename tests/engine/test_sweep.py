"""The sequence-length sweep (engine/measurements/sweep.py): its lengths, the cut at the model's maximum positions, the
points it measures on a tiny llama, an A/B's two interleaved curves, an arm that stops fitting, and its refusals."""

import pytest

from torchperf_tui.engine.measurements.ab_arms import parse_arm_spec
from torchperf_tui.engine.measurements.bench_config import BenchConfig
from torchperf_tui.engine.measurements.sweep import (cut_at_max, length_estimate, parse_seq_lens, run_sweep,
                                                  sweep_lengths, time_estimate, SweepPoint)
from torchperf_tui.core.errors import TorchperfError
from torchperf_tui.engine.workloads.model_args import parse_model_args

TINY_LLAMA = ("num_hidden_layers=2,hidden_size=64,intermediate_size=128,num_attention_heads=4,num_key_value_heads=4,"
              "vocab_size=256,max_position_embeddings=64")


def llama(**kwargs) -> BenchConfig:
    return BenchConfig(model="hf:llama", model_args=parse_model_args(TINY_LLAMA), device="cpu", **kwargs)


def test_lengths_double_from_lo_and_end_at_hi():
    assert sweep_lengths(128, 1024) == [128, 256, 512, 1024]
    assert sweep_lengths(100, 1000) == [100, 200, 400, 800, 1000]
    assert sweep_lengths(64, 64) == [64]


@pytest.mark.parametrize("text, message", [("0-8", "sequence length 0: it must be at least 1"), ("512-128", r"LO \(512\) is above HI \(128\)"),
                                           ("abc", "write LO-HI"), ("8-", "write LO-HI"), ("-8", "write LO-HI")])
def test_bad_lengths_are_one_line(text, message):
    with pytest.raises(TorchperfError, match=message) as caught:
        parse_seq_lens(text)
    assert "\n" not in str(caught.value)


def test_one_number_is_one_length_and_lo_hi_parse():
    assert parse_seq_lens("128-4096") == (128, 4096)
    assert parse_seq_lens(" 64 ") == (64, 64)


def test_lengths_past_the_maximum_are_cut_with_a_note():
    kept, note = cut_at_max([16, 32, 64, 128], 32, "max_position_embeddings")
    assert kept == [16, 32]
    assert note == "lengths 64, 128 past the model's maximum of 32 positions (max_position_embeddings): not run"
    assert cut_at_max([16, 32], 32) == ([16, 32], None)
    assert cut_at_max([16, 32], None) == ([16, 32], None)


def test_estimates_scale_memory_by_the_square_and_time_by_the_growth_seen():
    last = SweepPoint(128, "", True, peak_bytes=1000, seconds=1.0)
    assert length_estimate(last, 256) == 4000 and length_estimate(None, 256) is None
    assert time_estimate({"": [last]}, 256) == pytest.approx(2.0)  # linear with one length
    quadratic = [SweepPoint(64, "", True, seconds=0.25), last]
    assert time_estimate({"": quadratic}, 256) == pytest.approx(4.0)


def test_a_sweep_measures_each_length_and_cuts_at_the_maximum():
    told = []
    result = run_sweep(llama(batch=2), 16, 256, iters=3, warmup=1, on_point=told.append)
    assert result.lengths == [16, 32, 64]
    assert any("128, 256 past the model's maximum of 64 positions" in note for note in result.notes)
    assert [p.length for p in result.points] == [16, 32, 64] and told == result.points
    for point in result.points:
        assert point.fits and point.iters == 3 and point.p90_ms >= point.median_ms > 0
        assert point.tokens_per_s == pytest.approx(2 * point.length * 1000 / point.median_ms)
        assert point.peak_bytes is not None
    assert result.batch == 2 and result.memory_kind == "rss" and result.stop_reason == "every length asked was measured"
    data = result.to_dict()
    assert data["arms"] == [{"name": "", "ran": result.arms[0][1]}] and len(data["points"]) == 3


def test_an_ab_sweep_measures_both_arms_at_every_length_interleaved(monkeypatch):
    from torchperf_tui.engine.measurements import batch_runner

    order = []
    real_call = batch_runner.ModelBatchRunner.__call__

    def spy(self, batch, warmup=1, iters=3):
        import torch

        order.append(("B" if torch.are_deterministic_algorithms_enabled() else "A", self.inputs.shape[-1]))
        return real_call(self, batch, warmup=warmup, iters=iters)

    monkeypatch.setattr(batch_runner.ModelBatchRunner, "__call__", spy)
    arms = (parse_arm_spec("threads=1"), parse_arm_spec("threads=1,deterministic_algorithms=on"))
    result = run_sweep(llama(), 16, 32, arms=arms, iters=4, warmup=0)
    assert result.ab and [name for name, _ in result.arms] == ["A", "B"]
    assert [p.length for p in result.curve("A")] == [16, 32] == [p.length for p in result.curve("B")]
    assert all(p.iters == 4 for p in result.points)  # two blocks of two per arm and length
    # A B B A at the first length, B A A B at the next: neither arm always goes first
    assert order == [("A", 16), ("B", 16), ("B", 16), ("A", 16), ("B", 32), ("A", 32), ("A", 32), ("B", 32)]


def test_an_arm_that_stops_fitting_ends_its_curve_and_the_other_goes_on(monkeypatch):
    from torchperf_tui.engine.measurements import batch_runner
    from torchperf_tui.engine.measurements.batch_search import MemoryCapExceeded

    real_call = batch_runner.ModelBatchRunner.__call__

    def quadratic_arm(self, batch, warmup=1, iters=3):
        import torch

        if torch.are_deterministic_algorithms_enabled() and self.inputs.shape[-1] >= 32:
            raise MemoryCapExceeded("over the CPU memory cap: needs about 9.0 GiB, cap 1.0 GiB")
        return real_call(self, batch, warmup=warmup, iters=iters)

    monkeypatch.setattr(batch_runner.ModelBatchRunner, "__call__", quadratic_arm)
    arms = (parse_arm_spec("threads=1"), parse_arm_spec("threads=1,deterministic_algorithms=on"))
    result = run_sweep(llama(), 16, 64, arms=arms, iters=2, warmup=0)
    assert [p.length for p in result.curve("A")] == [16, 32, 64]
    assert [p.length for p in result.curve("B")] == [16]
    failed = result.point(32, "B")
    assert not failed.fits and "over the CPU memory cap" in failed.reason
    assert result.point(64, "B") is None  # not run again once it did not fit
    assert "arm B: length 32 does not fit: over the CPU memory cap" in result.stop_reason


def test_the_time_budget_stops_the_sweep_after_a_length():
    result = run_sweep(llama(), 16, 64, iters=2, warmup=0, time_budget_s=1e-6)
    assert [p.length for p in result.points] == [16]
    assert result.stop_reason.startswith("time budget: length 32 would end past the 1e-06 s budget")


def test_a_model_that_is_not_fed_token_ids_is_refused_in_one_line():
    cfg = BenchConfig(model="tests.tinymodels:tiny_cnn", device="cpu")
    with pytest.raises(TorchperfError, match="sweep varies a token model's sequence length, and "
                                             "tests.tinymodels:tiny_cnn takes 1x3x224x224, not token ids"):
        run_sweep(cfg, 16, 32)


def test_lengths_all_past_the_maximum_are_refused():
    with pytest.raises(TorchperfError, match="every length is past hf:llama's maximum of 64 positions"):
        run_sweep(llama(), 128, 256)


def test_the_one_preamble_checks_the_dtype_before_the_model_is_looked_at():
    cfg = BenchConfig(model="tests.tinymodels:tiny_cnn", device="cpu", dtype="float7")
    with pytest.raises(TorchperfError, match="float7"):
        run_sweep(cfg, 16, 32)


def test_the_sweep_result_and_its_words_load_without_torch():
    import subprocess
    import sys

    code = ("import sys; from torchperf_tui.engine.measurements.sweep import SweepResult, parse_seq_lens; "
            "import torchperf_tui.wording.sweep; assert parse_seq_lens('8-64') == (8, 64); "
            "assert 'torch' not in sys.modules, 'torch imported'")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
