"""The A/B statistics on synthetic samples with a known shift and with none (seeded, no timing)."""

import numpy as np
import pytest

from torchperf_tui.engine.measurements.ab_arms import parse_arm_spec
from torchperf_tui.engine.measurements.ab_result import MIN_PAIRS, block_verdict
from torchperf_tui.engine.measurements.abtest import block_order
from torchperf_tui.core.errors import FlagError
from torchperf_tui.engine.measurements.flags import Flags


def synthetic_blocks(rng, blocks, per_block, scale_b=1.0):
    """Latencies with a per-block drift shared by both arms (the noise a shared box adds) and right skew."""
    a_blocks, b_blocks = [], []
    for _ in range(blocks):
        drift = rng.normal(1.0, 0.05)
        a_blocks.append(list(10.0 * drift * (1 + rng.gamma(2.0, 0.02, per_block))))
        drift_b = drift * rng.normal(1.0, 0.01)
        b_blocks.append(list(10.0 * scale_b * drift_b * (1 + rng.gamma(2.0, 0.02, per_block))))
    return a_blocks, b_blocks


def test_a_known_speed_up_is_found_with_its_size():
    rng = np.random.default_rng(1)
    a, b = synthetic_blocks(rng, 12, 20, scale_b=0.75)
    v = block_verdict(a, b)
    assert v.significant and v.p_value < 0.01
    assert v.ratio == pytest.approx(0.75, rel=0.03)
    assert v.ci_low < 0.75 * 1.03 and v.ci_high > 0.75 * 0.97 and v.ci_high < 1
    faster = float(v.summary().split(" % faster")[0].removeprefix("B is "))
    assert faster == pytest.approx(100 / 3, abs=3)  # 1/0.75 - 1 = 33.3 % faster
    assert "faster" in v.summary() and "95 % CI" in v.summary()


def test_a_slowdown_reads_as_slower():
    rng = np.random.default_rng(2)
    a, b = synthetic_blocks(rng, 10, 20, scale_b=1.2)
    v = block_verdict(a, b)
    assert v.significant and "slower" in v.summary()


def test_identical_arms_are_called_noise_at_most_alpha_of_the_time():
    rng = np.random.default_rng(3)
    trials = 200
    false_positives = sum(block_verdict(*synthetic_blocks(rng, 10, 15), seed=i).significant
                          for i in range(trials))
    assert false_positives / trials <= 0.05


def test_no_difference_summary_and_all_equal_blocks():
    v = block_verdict([[5.0, 5.0]] * 6, [[5.0, 5.0]] * 6)
    assert not v.significant and v.p_value == 1.0 and v.ratio == 1.0
    assert v.summary().startswith("no significant difference (B/A per block pair 1.00")


def test_the_fewest_blocks_allowed_can_still_call_a_clear_difference():
    # Five pairs could not: the signed-rank test's smallest two-sided p with 5 is 0.0625 (seen on an H100, an AMP
    # step 30 % faster in every pair, with a CI far from 1, read "no significant difference").
    a = [[10.0 + 0.01 * i] * 3 for i in range(MIN_PAIRS)]
    b = [[7.0 + 0.013 * i] * 3 for i in range(MIN_PAIRS)]
    v = block_verdict(a, b)
    assert v.significant and v.p_value < 0.05 and v.summary().startswith("B is")


def test_too_few_or_unpaired_blocks_are_refused():
    with pytest.raises(Exception, match="at least 6 blocks"):
        block_verdict([[1.0]] * 5, [[1.0]] * 5)
    with pytest.raises(Exception, match="same number of blocks"):
        block_verdict([[1.0]] * 6, [[1.0]] * 5)


def test_block_order_is_balanced_and_seeded():
    order = block_order(20, seed=7)
    assert order.count("A") == order.count("B") == 20
    assert all(sorted(order[i:i + 2]) == ["A", "B"] for i in range(0, 40, 2))
    assert order == block_order(20, seed=7) and order != block_order(20, seed=8)
    assert {tuple(order[i:i + 2]) for i in range(0, 40, 2)} == {("A", "B"), ("B", "A")}


def test_arm_specs_parse_flags_and_settings():
    spec = parse_arm_spec("threads=2, cudnn_benchmark=on, tf32=off, dtype=fp16, channels_last=true")
    assert spec.flags == Flags(num_threads=2, cudnn_benchmark=True, tf32_matmul=False, tf32_cudnn=False,
                               tf32_rnn=False)  # tf32 is CUDA's three: cuDNN's RNNs with its convolutions, as before
    assert spec.dtype == "float16" and spec.channels_last is True
    assert parse_arm_spec("").flags == Flags() and parse_arm_spec("").text == "base"
    assert parse_arm_spec("deterministic=1").flags.cudnn_deterministic


@pytest.mark.parametrize("text, message", [
    ("benchmark=maybe", "expected on/off"),
    ("speed=fast", "unknown key 'speed'"),
    ("threads=two", "whole number"),
    ("threads=0", "at least 1"),
    ("threads", "write key=value"),
    ("dtype=int3", "unknown dtype"),
    ("shapes=sometimes", "unknown shape schedule"),
    ("mkldnn=on,mkldnn=off", "mkldnn given twice"),  # once accepted, the last one silently winning
    ("threads=1, threads=1", "threads given twice"),
    ("benchmark=on,cudnn_benchmark=off", "set by both benchmark and cudnn_benchmark"),
    ("dtype=fp16,dtype=bf16", "dtype given twice"),
])
def test_bad_specs_are_one_line_errors(text, message):
    with pytest.raises(Exception, match=message) as info:
        parse_arm_spec(text)
    assert "\n" not in str(info.value)


def test_interleaved_run_gives_each_block_its_own_flags_and_a_verdict():
    from tests.tinymodels import ThreadsProbe
    from torchperf_tui.engine.measurements.abtest import run_ab
    from torchperf_tui.engine.measurements.bench_config import BenchConfig

    before = Flags.current()
    ThreadsProbe.seen.clear()
    blocks = []
    base = BenchConfig(model="tests.tinymodels:threads_probe", input_shape=(1, 3, 16, 16), device="cpu")
    result = run_ab(base, parse_arm_spec("threads=1"), parse_arm_spec("threads=2"), blocks=6, per_block=3,
                    seed=3, on_block=lambda arm, i, n, s: blocks.append((arm, len(s))))
    assert Flags.current() == before
    assert [arm for arm, _ in blocks] == result.order and len(blocks) == 12
    # every forward pass (first + warm-up + 3 timed per block) ran under its own arm's thread count
    expected = [1 if arm == "A" else 2 for arm in result.order for _ in range(5)]
    assert ThreadsProbe.seen == expected
    assert len(result.a.blocks) == len(result.b.blocks) == 6 and all(n == 3 for _, n in blocks)
    assert result.verdict is not None and result.verdict.blocks == 6
    assert result.a.median_ms > 0 and result.to_dict()["b"]["flags"]["num_threads"] == 2
    assert result.summary() == result.verdict.summary()


def test_cancelled_comparison_keeps_complete_pairs_only():
    from torchperf_tui.engine.measurements.abtest import run_ab
    from torchperf_tui.engine.measurements.bench_config import BenchConfig

    blocks_done = []
    base = BenchConfig(model="tests.tinymodels:tiny_cnn", input_shape=(1, 3, 8, 8), device="cpu")
    result = run_ab(base, parse_arm_spec(""), parse_arm_spec("mkldnn=off"), blocks=6, per_block=2,
                    on_block=lambda *a: blocks_done.append(a), should_cancel=lambda: len(blocks_done) >= 3)
    assert result.cancelled and result.verdict is None
    assert len(result.a.blocks) == len(result.b.blocks) == 1
    assert result.summary() == "no verdict: cancelled after 1 block pair(s) (a verdict needs 6)"
    assert result.a.ci_low_ms is None and result.b.ci_low_ms is None  # no CI from one block


def test_arms_can_follow_their_own_shape_schedule():
    from torchperf_tui.engine.measurements.abtest import run_ab
    from torchperf_tui.engine.measurements.bench_config import BenchConfig

    assert parse_arm_spec("shapes=random:8-16").shapes == "random:8-16"
    base = BenchConfig(model="tests.tinymodels:tiny_cnn", input_shape=(1, 3, 16, 16), device="cpu")
    result = run_ab(base, parse_arm_spec(""), parse_arm_spec("shapes=cycle:2:8-24"), blocks=6, per_block=2)
    assert result.a.shapes == "fixed" and result.a.first_seen == 0
    assert result.b.shapes == "cycle:2:8-24" and result.b.first_seen == 2  # 8 and 24 are new, once each
    assert result.verdict is not None
    assert result.a.ci_low_ms <= result.a.median_ms * 1.5 and result.a.ci_low_ms <= result.a.ci_high_ms


def test_arm_threads_keep_each_arm_on_one_thread_of_its_own_on_cuda_only():
    """cuDNN's per-thread algorithm cache must not carry one arm's choices into the other (CUDA); on the
    CPU one thread serves both, so no second OpenMP pool spins beside the running arm."""
    import threading

    from torchperf_tui.engine.measurements.abtest import ArmThreads

    with ArmThreads("AB", separate=True) as threads:
        seen = {arm: {threads.run(arm, threading.get_ident) for _ in range(3)} for arm in "AB"}
    assert len(seen["A"]) == len(seen["B"]) == 1 and seen["A"] != seen["B"]
    assert threading.get_ident() not in seen["A"] | seen["B"]
    with ArmThreads("AB", separate=False) as threads:
        assert {threads.run(arm, threading.get_ident) for arm in "AB"} == {threading.get_ident()}


def test_a_cpu_comparison_runs_both_arms_on_the_callers_thread():
    import threading

    from tests.tinymodels import ThreadIdentProbe
    from torchperf_tui.engine.measurements.abtest import run_ab
    from torchperf_tui.engine.measurements.bench_config import BenchConfig

    ThreadIdentProbe.seen.clear()
    base = BenchConfig(model="tests.tinymodels:thread_probe", input_shape=(1, 3, 8, 8), device="cpu")
    run_ab(base, parse_arm_spec(""), parse_arm_spec("mkldnn=off"), blocks=6, per_block=2)
    assert set(ThreadIdentProbe.seen) == {threading.get_ident()}


def test_verdict_wording_for_large_ratios_and_disagreeing_tests():
    from torchperf_tui.engine.measurements.ab_result import Verdict

    slow = Verdict(blocks=10, ratio=8.62, ci_low=7.9, ci_high=9.4, p_value=0.002, significant=True)
    assert slow.summary() == "B is 8.62x slower (95 % CI 7.90-9.40x, p=0.002)"
    fast = Verdict(blocks=10, ratio=0.25, ci_low=0.2, ci_high=0.3, p_value=0.002, significant=True)
    assert fast.summary().startswith("B is 4.00x faster (95 % CI 3.33-5.00x")
    torn = Verdict(blocks=10, ratio=1.12, ci_low=1.013, ci_high=1.236, p_value=0.0645, significant=False)
    assert "excludes 1, but the signed-rank test does not agree (p=0.0645)" in torn.summary()
    assert torn.summary().startswith("no significant difference")


def test_the_arms_medians_disagreeing_with_the_paired_ratio_is_explained():
    """Pooled medians read a drift between blocks that the paired ratio cancels: the result says so."""
    from torchperf_tui.engine.measurements.ab_result import ABResult, ArmResult, block_verdict
    from torchperf_tui.engine.measurements.abtest import block_order
    from torchperf_tui.engine.measurements.flags import Flags

    # The machine slows down halfway; A happens to run more of its blocks in the slow half. Within each
    # neighbouring pair B is 2 % slower, but B's pooled median is well below A's.
    a_blocks = [[10.0] * 5] * 3 + [[20.0] * 5] * 7
    b_blocks = [[10.2] * 5] * 7 + [[20.4] * 5] * 3
    arms = []
    for blocks in (a_blocks, b_blocks):
        arm = ArmResult(spec="", flags=Flags(), dtype="float32", channels_last=False, blocks=blocks)
        arm.summarise()
        arms.append(arm)
    verdict = block_verdict([[10.0] * 5] * 10, [[10.2] * 5] * 10)
    result = ABResult(model="m", device="cpu", input_shape=(1, 3), a=arms[0], b=arms[1], order=block_order(10, 0),
                      verdict=verdict, cancelled=False, duration_s=1.0)
    assert result.medians_ratio() == pytest.approx(10.2 / 20.0)
    assert "outside the paired CI" in result.ratio_note()
    assert "B/A per block pair" in result.summary() or "B is" in result.summary()


def test_a_time_budget_stops_the_blocks_and_the_result_says_how_many_ran():
    from torchperf_tui.engine.measurements.abtest import run_ab
    from torchperf_tui.engine.measurements.bench_config import BenchConfig

    # each forward pass sleeps 2 ms: a block of 2 timed + 2 settling passes takes at least 8 ms, a pair 16 ms,
    # so 100 pairs take at least 1.6 s and a 0.3 s budget stops them well short
    base = BenchConfig(model="tests.engine.test_timing_modes:sleepy", input_shape=(2, 4), device="cpu")
    result = run_ab(base, parse_arm_spec(""), parse_arm_spec("mkldnn=off"), blocks=100, per_block=2,
                    time_budget_s=0.3)
    assert not result.cancelled and 1 <= result.pairs < 100
    assert result.out_of_time == f"time budget 0.3 s reached after {result.pairs} of 100 block pairs"
    assert result.summary().startswith(result.out_of_time if result.verdict else "no verdict: " + result.out_of_time)
    if result.verdict is not None:  # the verdict is from the pairs that ran
        assert result.verdict.blocks == result.pairs
    assert result.to_dict()["out_of_time"] == result.out_of_time
    unbounded = run_ab(base, parse_arm_spec(""), parse_arm_spec("mkldnn=off"), blocks=6, per_block=1)
    assert unbounded.pairs == 6 and unbounded.out_of_time is None


def test_same_arms_compares_what_each_arm_runs_not_how_it_was_typed():
    from torchperf_tui.engine.measurements.ab_arms import same_arms
    from torchperf_tui.engine.measurements.bench_config import BenchConfig

    base = BenchConfig(model="tests.tinymodels:tiny_cnn", input_shape=(1, 3, 8, 8), device="cpu")
    assert same_arms(base, parse_arm_spec(""), parse_arm_spec("mkldnn=on, channels_last=off"))
    assert same_arms(base, parse_arm_spec("dtype=fp32"), parse_arm_spec(""))
    assert not same_arms(base, parse_arm_spec(""), parse_arm_spec("mkldnn=off"))
    assert not same_arms(base, parse_arm_spec(""), parse_arm_spec("step=train"))
    assert not same_arms(base, parse_arm_spec(""), parse_arm_spec("shapes=cycle:2"))


def test_a_flag_with_no_effect_is_said_of_the_arm_that_set_it():
    from torchperf_tui.engine.measurements.abtest import inert_arm_flags, run_ab
    from torchperf_tui.engine.measurements.bench_config import BenchConfig

    on = Flags(cudnn_benchmark=True)
    only = inert_arm_flags(Flags(), on, Flags(), "cpu")
    assert len(only) == 1 and only[0].startswith("arm A: cudnn.benchmark has no effect here: ")  # once: "B: ..."
    assert inert_arm_flags(Flags(), Flags(), on, "cpu")[0].startswith("arm B: cudnn.benchmark has no effect here")
    # the base run set it and arm B turned it off: B set the difference
    assert inert_arm_flags(on, on, Flags(), "cpu")[0].startswith("arm B: ")
    assert inert_arm_flags(Flags(), on, on, "cpu") == []  # both arms alike: not what the verdict is about
    base = BenchConfig(model="tests.tinymodels:tiny_cnn", input_shape=(1, 3, 8, 8), device="cpu")
    result = run_ab(base, parse_arm_spec("cudnn_benchmark=on"), parse_arm_spec(""), blocks=6, per_block=1)
    assert [n for n in result.notes if "cudnn.benchmark" in n][0].startswith("arm A: cudnn.benchmark has no effect")


def test_an_ab_comparison_reads_the_host_over_its_blocks_and_is_marked_like_a_timing_run(monkeypatch):
    """The host read at the edges of the interleaved blocks (a fake reader: others busy on 1.5 cores), each arm's
    spread on its own samples, and the marks in to_dict, in both arms' history records and in the CLI."""
    from tests.engine.test_host_noise import QUIET_HOST, FakeReader, noise_of
    from torchperf_tui.cli import render as cli_render
    from torchperf_tui.engine.measurements.abtest import run_ab
    from torchperf_tui.engine.records.history_records import HistoryRecord, records_from_ab
    from torchperf_tui.engine.hardware.host_noise import HostProbe
    from torchperf_tui.engine.measurements.bench_config import BenchConfig

    busy = ((0.0, 5.0, 100.0, 50.0), (2.0, 5.6, 104.0, 51.0))  # others: 1.5 cores, the load 5.6 at the end
    monkeypatch.setattr("torchperf_tui.engine.measurements.abtest.HostProbe", lambda: HostProbe(FakeReader(*busy)))
    base = BenchConfig(model="tests.tinymodels:tiny_cnn", input_shape=(1, 3, 16, 16), device="cpu")
    result = run_ab(base, parse_arm_spec(""), parse_arm_spec("mkldnn=off"), blocks=6, per_block=4)
    host = "noisy host: load 5.6 on 2 cores, other processes busy on 1.5 of them during the timed run"
    noise = result.host_noise
    assert noise.other_busy_cores == pytest.approx(1.5) and noise.warnings() == [host]
    assert noise.p50_over_min is None and noise.missing["spread"] == "said per arm"
    for arm in (result.a, result.b):  # 24 samples each: their own spread, the same host figures
        assert arm.host_noise.samples == 24 and arm.host_noise.p50_over_min is not None
        assert arm.host_noise.other_busy_cores == pytest.approx(1.5)
    result.app_marks = ["window resized during the run"]  # as the app sets it
    # an arm's noisy samples are said of that arm (a synthetic spread: the real one depends on the box)
    result.a.host_noise = noise_of(*QUIET_HOST, [2.87] * 30)  # A quiet whatever this box did meanwhile
    result.b.host_noise = noise_of(*QUIET_HOST, [2.87] * 5 + [194.0] * 25)
    marks = ["window resized during the run", host, "arm B: noisy samples: p50 is 67.6x the fastest sample"]
    assert result.disturbance_marks() == marks
    data = result.to_dict()
    assert data["disturbance_marks"] == marks and data["host_noise"]["host_noisy"] is True
    assert data["b"]["host_noise"]["samples_noisy"] is True
    records = records_from_ab(result, fingerprint={})
    assert [record.disturbed for record in records] == [marks, marks]
    assert HistoryRecord.from_dict(records[1].to_dict()).details["host_noise"]["samples_noisy"] is True
    with cli_render.console.capture() as captured:
        cli_render.render_ab(result)
    out = " ".join(captured.get().split())  # as wrapped to the console's width
    assert all(f"warning: {line}" in out for line in marks) and f"host: {noise.summary()}" in out


def test_blocks_left_open_are_fitted_to_the_time_budget_from_a_pass_of_each_arm():
    from torchperf_tui.engine.measurements.abtest import DEFAULT_PER_BLOCK, fit_per_block, run_ab
    from torchperf_tui.engine.measurements.bench_config import BenchConfig

    # at 1 s a pair, 10 blocks of 20 (+2 settling passes) would take 220 s: 60 % of 120 s leaves 7 - 2 timed passes
    per_block, note = fit_per_block(10, 120.0, {"A": 0.6, "B": 0.4})
    assert per_block == 5 and note.startswith("5 timed passes per block, not 20: at a pass of A 600 ms and B 400 ms")
    assert fit_per_block(10, 1e6, {"A": 0.01, "B": 0.01}) == (DEFAULT_PER_BLOCK, None)  # fits: left as it is
    one, note = fit_per_block(10, 1.0, {"A": 5.0, "B": 5.0})
    assert one == 1 and note.startswith("1 timed pass per block, not 20")  # at least one, the budget stops the rest
    # the engine times one pass of each arm first: a sleepy model's 2 ms passes and a 1 s budget for 6 pairs
    base = BenchConfig(model="tests.engine.test_timing_modes:sleepy", input_shape=(2, 4), device="cpu")
    result = run_ab(base, parse_arm_spec(""), parse_arm_spec("mkldnn=off"), blocks=6, per_block=None,
                    time_budget_s=0.5)
    fitted = [n for n in result.notes if " per block, not 20" in n]
    assert len(fitted) == 1 and all(len(block) < DEFAULT_PER_BLOCK for block in result.a.blocks)
    assert len(result.a.blocks[0]) == int(fitted[0].split()[0])
    explicit = run_ab(base, parse_arm_spec(""), parse_arm_spec("mkldnn=off"), blocks=6, per_block=3,
                      time_budget_s=0.5)
    assert all(len(block) == 3 for block in explicit.a.blocks) and not any("timed passes" in n for n in explicit.notes)


def test_each_arms_record_keeps_the_run_that_arm_was():
    """An A/B arm's record keeps its run whole, as a timing run's does: the base with the arm's flags and run options,
    the device and shape resolved; so History can say a random schedule's seed of an arm as of any run. The
    comparison's JSON stays as it was."""
    from torchperf_tui.engine.measurements.abtest import run_ab
    from torchperf_tui.engine.measurements.bench_config import BenchConfig
    from torchperf_tui.engine.records.history_records import HistoryRecord, records_from_ab

    base = BenchConfig(model="tests.tinymodels:tiny_cnn", input_shape=(1, 3, 16, 16), device="auto", seed=5,
                       shapes="random:12-16")
    result = run_ab(base, parse_arm_spec(""), parse_arm_spec("mkldnn=off,channels_last=on"), blocks=6, per_block=2)
    records = [HistoryRecord.from_dict(record.to_dict()) for record in records_from_ab(result, fingerprint={})]
    configs = [record.config for record in records]
    assert [config["flags"]["mkldnn_enabled"] for config in configs] == [True, False]
    assert [config["channels_last"] for config in configs] == [False, True]
    assert all(config["device"] == "cpu" and config["input_shape"] == [1, 3, 16, 16] and config["seed"] == 5
               and config["shapes"] == "random:12-16" for config in configs)
    assert [record.setup()["seed"] for record in records] == [5, 5]
    assert all("config" not in result.to_dict()[arm] for arm in ("a", "b"))
