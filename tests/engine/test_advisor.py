"""`why` (engine/analysis/advisor.py) on planted problems: a layer written slowly is named with its share, a pass on one
thread of several cores gets the thread count with its fix, attention forced to math at a long sequence gets "attention
runs math" first, a well-set-up small model gets no finding above the threshold; a fix's A/B marks its finding
confirmed or refuted and re-ranks by the measured gain (the A/B here a seam: the real ones, with the estimates beside
the measured gains, are bench/why_planted.py's)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from torchperf_tui.engine.analysis.advice_result import CONFIRMED, INCONCLUSIVE, NOT_RUN, REFUTED, Finding
from torchperf_tui.engine.analysis.advisor import advise
from torchperf_tui.engine.measurements.bench_config import BenchConfig
from torchperf_tui.engine.measurements.flags import Flags
from torchperf_tui.engine.workloads.model_args import parse_model_args

TINY_LLAMA = parse_model_args("num_hidden_layers=2,hidden_size=64,intermediate_size=128,num_attention_heads=4,"
                              "num_key_value_heads=4,vocab_size=256")


def cores(monkeypatch, n: int) -> None:
    """The box as `why` reads it: `n` physical cores."""
    from torchperf_tui.engine.analysis import advisor
    from torchperf_tui.engine.hardware.device import probe_cpu

    real = probe_cpu()
    monkeypatch.setattr(advisor, "probe_cpu", lambda: SimpleNamespace(**{**real.__dict__, "physical_cores": n}))


def fake_ab(ratio: float, significant: bool, a_ms: float = 10.0, asked: list | None = None):
    """An A/B seam: each fix's 'measurement', B/A `ratio` around a `a_ms` arm A."""
    def run(cfg, fix, budget_s, blocks):
        if asked is not None:
            asked.append(fix)
        verdict = SimpleNamespace(ratio=ratio, ci_low=ratio * 0.95, ci_high=ratio * 1.05, p_value=0.002 if significant
                                  else 0.4, significant=significant)
        return SimpleNamespace(verdict=verdict, a=SimpleNamespace(median_ms=a_ms))
    return run


def test_a_layer_written_slowly_is_named_with_its_share_and_no_option_to_fix_it(monkeypatch):
    cores(monkeypatch, 1)
    cfg = BenchConfig(model="tests.tinymodels:slow_layer_net", input_shape=(8, 64), device="cpu", iters=10, warmup=2,
                      flags=Flags(num_threads=1))
    result = advise(cfg, budget_s=None, verify=3, run_fix=fake_ab(0.5, True))
    assert [(f.key, f.layer) for f in result.findings] == [("slow_layer", "scale")], (result.layers, result.below,
                                                                                        result.measurements)
    finding = result.findings[0]
    assert finding.what.startswith("layer scale (SlowElementwise) takes ") and finding.share >= 0.1  # SLOW_SHARE
    assert not finding.fix and finding.verdict == NOT_RUN and finding.why_not_run.startswith("no option fixes it")
    assert any(line.startswith("time per layer: ") for line in finding.evidence)
    assert result.layers[0][0] == "scale"  # the slowest layer first, for the report's bars


def test_one_thread_of_several_cores_gets_the_thread_count_confirmed_and_its_measured_gain(monkeypatch):
    cores(monkeypatch, 4)
    asked = []
    cfg = BenchConfig(model="tests.tinymodels:wide_mlp", input_shape=(16, 512), device="cpu", iters=10, warmup=2,
                      flags=Flags(num_threads=1))
    result = advise(cfg, budget_s=None, verify=3, run_fix=fake_ab(0.6, True, a_ms=4.0, asked=asked))
    finding = result.findings[0]
    assert finding.key == "threads" and finding.fix == "threads=4" and finding.options == "--threads 4"
    assert asked == ["threads=4"]
    # at stake: the computing share of the pass (as its evidence says it) times 1 - 1/4
    computing, = [float(line.split(": ")[1].split(" %")[0]) for line in finding.evidence
                  if line.startswith("time per layer: ")]
    assert computing > 0 and finding.share == pytest.approx(computing / 100 * 0.75, abs=0.01)
    assert finding.verdict == CONFIRMED and finding.measured_ms == pytest.approx(4.0 * 0.4)
    assert finding.measured_interval_ms == pytest.approx((4.0 * (1 - 0.63), 4.0 * (1 - 0.57)))


def test_attention_forced_to_math_at_a_long_sequence_comes_first_with_its_fix(monkeypatch):
    cores(monkeypatch, 1)
    cfg = BenchConfig(model="hf:llama", model_args=TINY_LLAMA, seq_len=1024, device="cpu", iters=3, warmup=1,
                      flags=Flags(sdpa="math", num_threads=1))
    result = advise(cfg, budget_s=None, verify=1, run_fix=fake_ab(0.3, True))
    first = result.findings[0]
    assert first.key == "attention_math" and first.what.startswith("attention runs math (sdpa=math) where flash")
    assert first.fix == "sdpa=all" and first.verdict == CONFIRMED and first.share > 0.2
    assert any("under math" in line and "under flash" in line for line in first.evidence)


def test_a_well_set_up_small_model_has_no_finding_above_the_threshold(monkeypatch):
    cfg = BenchConfig(model="tests.tinymodels:tiny_cnn", input_shape=(2, 3, 32, 32), device="cpu", iters=10,
                      warmup=2, flags=Flags(num_threads=1))
    cores(monkeypatch, 1)  # one thread on a one-core box: nothing to gain there
    asked = []
    result = advise(cfg, budget_s=None, verify=3, run_fix=fake_ab(0.5, True, asked=asked))
    assert result.findings == [] and asked == []
    from torchperf_tui.wording.advice import advice_lines

    assert "no finding above 5 % of the pass" in advice_lines(result)


def test_a_refuted_fix_goes_below_the_estimates_and_one_out_of_budget_is_not_run(monkeypatch):
    from torchperf_tui.engine.analysis import advisor

    findings = [Finding("a", "a", [], at_stake_ms=5.0, pass_ms=10.0, fix="threads=2", options="--threads 2"),
                Finding("b", "b", [], at_stake_ms=3.0, pass_ms=10.0, fix="sdpa=all", options="--sdpa all"),
                Finding("d", "d", [], at_stake_ms=2.5, pass_ms=10.0, fix="tf32=on", options="--tf32"),
                Finding("c", "c", [], at_stake_ms=2.0, pass_ms=10.0, fix="mkldnn=on", options="--mkldnn")]
    budget = iter([100.0, 100.0, 100.0, 0.5])
    # a: B/A 1.1, its interval all above 1 (refuted); b: a significant 0.9 (confirmed); d: 0.9 not significant,
    # its interval on both sides of 1 (inconclusive); c: out of budget
    ratios = {"threads=2": (1.1, False), "sdpa=all": (0.9, True), "tf32=on": (0.99, False)}
    advisor._verify(None, findings, 4, 6, lambda: next(budget), lambda: False, lambda line: None,
                    lambda cfg, fix, b, blocks: fake_ab(*ratios[fix])(cfg, fix, b, blocks))
    assert [f.verdict for f in findings] == [REFUTED, CONFIRMED, INCONCLUSIVE, NOT_RUN]
    assert findings[3].why_not_run == "out of budget"
    findings.sort(key=lambda f: f.rank())
    assert [f.key for f in findings] == ["b", "d", "c", "a"]  # the measured first, then the estimates, refuted last
    from torchperf_tui.wording.advice import measured_text

    assert measured_text(findings[1]).startswith("inconclusive: the A/B could not tell (B/A 0.99, CI 0.94-1.04")
    assert measured_text(findings[3]).startswith("refuted: slower (B/A 1.10")


def test_the_measured_ceilings_give_tf32_bfloat16_and_channels_last_on_a_gpu_that_has_them():
    """A float32 conv model on an Ampere GPU whose kept ceilings say tf32 4x, bfloat16 8x and channels_last convs 2x
    the float32 NCHW rate: each compute-bound layer's FLOPs at the faster rate (the GPU faked: the ceilings and the
    layer times are given)."""
    from torchperf_tui.engine.analysis.advisor import _ceiling_findings
    from torchperf_tui.engine.analysis.layer_times import ModuleTime
    from torchperf_tui.engine.hardware.ceilings import Ceiling, CeilingsResult, Trial

    fp32_trials = [Trial("conv2d 3x3", "8x64x56x56 -> 64", None, 1e13), Trial("conv2d 3x3 channels_last",
                                                                                "8x64x56x56 -> 64", None, 2e13)]
    kept = CeilingsResult(device="cuda:0", key="fake", measured_at=0.0, ceilings=[
        Ceiling("compute", "float32", 1e13, "", 0.1, 3, "conv2d 3x3 channels_last", tried=fp32_trials),
        Ceiling("compute", "tf32", 4e13, "", 0.1, 3), Ceiling("compute", "bfloat16", 8e13, "", 0.1, 3)])
    layers = SimpleNamespace(pass_ms=2.0, modules=[ModuleTime("conv", "Conv2d", True, 1.2, calls=1),
                                                   ModuleTime("relu", "ReLU", True, 0.3, calls=1),
                                                   ModuleTime("fc", "Linear", True, 0.5, calls=1)])
    flops = {"conv": (10**10, 0), "relu": (0, 10**6), "fc": (10**6, 10**6)}  # conv: 1 ms at 1e13; fc: not bound
    cfg = BenchConfig(model="resnet50", device="cuda", flags=Flags(tf32_matmul=False, tf32_cudnn=False))
    found = {f.key: f for f in _ceiling_findings(cfg, "cuda", (8, 0), layers, flops, 2.0, kept)}
    assert set(found) == {"dtype_tf32", "dtype_bfloat16", "channels_last"}
    assert found["dtype_tf32"].at_stake_ms == pytest.approx(1.0 * (1 - 1 / 4))
    assert found["dtype_bfloat16"].at_stake_ms == pytest.approx(1.0 * (1 - 1 / 8))
    assert found["channels_last"].at_stake_ms == pytest.approx(1.0 * (1 - 1 / 2))
    assert (found["dtype_tf32"].options, found["dtype_tf32"].changes_numerics) == ("--tf32", True)
    assert (found["channels_last"].options, found["channels_last"].changes_numerics) == ("--channels-last", False)
    # before Ampere neither tf32 nor bfloat16 runs on tensor cores: only the layout is said
    assert [f.key for f in _ceiling_findings(cfg, "cuda", (7, 5), layers, flops, 2.0, kept)] == ["channels_last"]
    # no ceilings kept: nothing is guessed
    assert _ceiling_findings(cfg, "cuda", (8, 0), layers, flops, 2.0, None) == []


def test_a_gpu_idle_a_third_of_the_pass_is_launch_bound_with_cuda_graphs_to_try():
    from torchperf_tui.engine.analysis.advisor import _launch_findings
    from torchperf_tui.engine.analysis.layer_times import GpuBusy

    layers = SimpleNamespace(gpu=GpuBusy(busy_ms=2.0, wall_ms=5.0, kernels=300, median_kernel_us=4.0))
    conditions = SimpleNamespace(gpm={"sm_active": 31.0})
    finding, = _launch_findings(layers, conditions, 5.0)
    assert finding.key == "launch_bound" and finding.at_stake_ms == pytest.approx(3.0)
    assert (finding.options, finding.fix) == ("--compile reduce-overhead", "compile=reduce-overhead")  # A/B-tested
    assert "GPM over the timing: SM active 31 %" in finding.evidence
    busy = SimpleNamespace(gpu=GpuBusy(busy_ms=4.5, wall_ms=5.0, kernels=30, median_kernel_us=100.0))
    assert _launch_findings(busy, None, 5.0) == [] and _launch_findings(SimpleNamespace(gpu=None), None, 5.0) == []


def test_a_model_time_per_layer_cannot_measure_still_gets_the_other_findings(monkeypatch):
    from torchperf_tui.core.errors import TorchperfError
    from torchperf_tui.engine.analysis import advisor

    def refuse(cfg, **kwargs):
        raise TorchperfError("this model's layers cannot be timed one by one")

    monkeypatch.setattr(advisor, "layer_times", refuse)
    cores(monkeypatch, 4)
    cfg = BenchConfig(model="tests.tinymodels:wide_mlp", input_shape=(16, 512), device="cpu", iters=5, warmup=1,
                      flags=Flags(num_threads=1))
    result = advise(cfg, budget_s=None, verify=0)
    assert "time per layer: not measured (this model's layers cannot be timed one by one)" in result.measurements
    assert [f.key for f in result.findings] == ["threads"]  # the whole pass taken as divisible
    assert "no time per layer: the whole pass taken as divisible" in result.findings[0].evidence


def test_the_gpus_own_counters_make_a_float32_pass_memory_bound_with_bfloat16_to_try_merged_with_the_ceilings():
    """GPM's DRAM activity at 70 % of a 10 ms float32 pass: memory-bound, bfloat16 moves half the bytes (3.5 ms at
    stake). Where the ceilings also say bfloat16, one finding, the larger stake, both evidences."""
    from torchperf_tui.engine.analysis.advisor import _gpm_findings, _merged

    cfg = BenchConfig(model="resnet50", device="cuda")
    conditions = SimpleNamespace(gpm={"sm_active": 90.0, "tensor_active": 2.0, "dram_active": 70.0})
    finding, = _gpm_findings(cfg, "cuda", conditions, 10.0)
    assert (finding.key, finding.fix, finding.changes_numerics) == ("memory_bound", "dtype=bfloat16", True)
    assert finding.at_stake_ms == pytest.approx(3.5)
    assert "GPM over the timing: SM active 90 % · tensor 2 % · DRAM 70 %" in finding.evidence
    # not memory-bound, already half-width, quantized, or no counters (the CPU, a GPU before Hopper): nothing said
    assert _gpm_findings(cfg, "cuda", SimpleNamespace(gpm={"dram_active": 30.0}), 10.0) == []
    assert _gpm_findings(BenchConfig(model="resnet50", device="cuda", dtype="bfloat16"), "cuda", conditions, 10.0) == []
    assert _gpm_findings(BenchConfig(model="resnet50", device="cuda", quant="int8wo"), "cuda", conditions, 10.0) == []
    assert _gpm_findings(cfg, "cuda", SimpleNamespace(gpm={}), 10.0) == [] == _gpm_findings(cfg, "cpu", conditions, 10)
    ceiling = Finding("dtype_bfloat16", "the compute-bound layers ...", ["measured ceilings: bfloat16 ..."],
                      at_stake_ms=2.0, pass_ms=10.0, fix="dtype=bfloat16", options="--dtype bfloat16")
    other = Finding("threads", "t", [], at_stake_ms=1.0, pass_ms=10.0, fix="threads=4", options="--threads 4")
    merged = _merged([ceiling, other, finding])
    assert [f.key for f in merged] == ["memory_bound", "threads"]
    assert "measured ceilings: bfloat16 ..." in merged[0].evidence


def test_a_compiled_set_up_s_fixes_are_not_ab_tested_and_say_why():
    from torchperf_tui.engine.analysis import advisor

    findings = [Finding("a", "a", [], at_stake_ms=5.0, pass_ms=10.0, fix="threads=2", options="--threads 2")]
    asked = []
    advisor._verify(BenchConfig(model="resnet18", compile="default"), findings, 3, 6, lambda: 100.0, lambda: False,
                    lambda line: None, fake_ab(0.5, True, asked=asked))
    assert asked == [] and findings[0].verdict == NOT_RUN
    assert findings[0].why_not_run == "the set-up is compiled: an A/B of its fix would compile both arms"


def test_a_throttled_gpu_is_said_beside_the_findings_with_the_pass_time_at_its_clocks_shortfall():
    from torchperf_tui.engine.analysis.advisor import throttle_notes
    from torchperf_tui.engine.hardware.run_conditions import RunConditions

    hot = RunConditions(gpu_index=0, readings=50, sm_clock_mhz=1500.0, sm_clock_max_mhz=2000,
                        reasons={"power cap (software)": 0.6}, throttled_share=0.6)
    note, = throttle_notes(hot, 10.0)
    assert note.startswith("the GPU was throttled: power cap (software) in 60 % of 50 readings (SM clock median 1500")
    assert note.endswith("at its clock's shortfall (25 %) about 2.50 ms of the pass")
    cool = RunConditions(gpu_index=0, readings=50, sm_clock_mhz=1980.0, sm_clock_max_mhz=1980, throttled_share=0.0)
    assert throttle_notes(cool, 10.0) == [] == throttle_notes(None, 10.0)


def test_a_compiled_set_up_says_its_compile_and_break_even_among_the_measurements():
    from torchperf_tui.engine.analysis.advisor import _compile_line

    timing = SimpleNamespace(compile_mode="default", compile_s=12.34,
                             compile_cost=SimpleNamespace(break_even_calls=1250, break_even_note=""))
    assert _compile_line(timing) == ("default compiled in 12.3 s (the cold start, not in the samples); it pays for "
                                     "itself after 1,250 passes against eager")
    timing.compile_cost = SimpleNamespace(break_even_calls=None,
                                          break_even_note="never: the compiled model is not faster than eager")
    assert _compile_line(timing).endswith("break-even: never: the compiled model is not faster than eager")


def test_two_results_say_which_findings_appeared_and_which_went_away():
    from torchperf_tui.engine.analysis.advice_result import findings_change
    from torchperf_tui.wording.advice import change_line

    assert findings_change(["threads", "slow_layer:scale"], ["slow_layer:scale", "attention_math"]) == \
        "findings appeared: attention_math; went away: threads"
    assert findings_change(["threads"], ["threads"]) == "the same findings"
    assert findings_change([], []) == "no findings in either"

    def advice(flags: str, *keys: str):
        return SimpleNamespace(model="resnet18", device="cpu", input_shape=(1, 3, 224, 224), dtype="float32",
                               flags_text=flags, pass_ms=7.5, step="infer", findings=[
                                   Finding(k, k, [], at_stake_ms=1.0, pass_ms=7.5) for k in keys])

    line = change_line(advice("threads=1", "threads"), advice("threads=2"))
    assert line == ("against the previous why of this model and input (threads=1, median 7.50 ms a pass): went "
                    "away: threads")
