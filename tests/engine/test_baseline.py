"""The baseline gate on crafted records (no torch, no measurement): how a REF is read, the verdict and its exit code
from two samples, the differences and the environment diff, the wording, and the samples kept compactly."""

from __future__ import annotations

import dataclasses
import json
import sys

import numpy as np
import pytest

from tests.records import make_record
from torchperf_tui.engine.measurements.bench_config import DEFAULT_TIME_BUDGET_S
from torchperf_tui.engine.records.baseline import BaselineError, config_of_record, resolve_baseline
from torchperf_tui.engine.records.baseline_gate import gate
from torchperf_tui.engine.records.history_file import HistoryFile
from torchperf_tui.engine.records.history_records import HistoryRecord
from torchperf_tui.wording.baseline import gate_lines


def timing(samples, **changes) -> HistoryRecord:
    """A timing record holding `samples`; `changes` replace its fields (fingerprint, flags, details, ...)."""
    record = make_record(p50=float(np.median(samples)) if len(samples) else 10.0)
    return dataclasses.replace(record, samples_ms=[float(s) for s in samples], **changes)


def noisy(median: float, n: int = 64, seed: int = 0) -> list[float]:
    """Samples around `median` with a 3 % spread and a slow tail, as a quiet box gives them."""
    rng = np.random.default_rng(seed)
    return list(median * (1 + np.abs(rng.normal(0, 0.03, n))))


# -- the verdict and its exit code


def test_the_same_samples_pass_as_the_same():
    verdict = gate(timing(noisy(10.0, seed=1)), timing(noisy(10.0, seed=2)))
    assert (verdict.verdict, verdict.failed, verdict.exit_code) == ("same", False, 0)
    assert verdict.ci_low <= 1.0 <= verdict.ci_high


def test_slower_past_the_threshold_and_significant_fails_with_exit_1():
    verdict = gate(timing(noisy(10.0, seed=1)), timing(noisy(15.0, seed=2)), fail_if_slower_pct=10)
    assert (verdict.verdict, verdict.failed, verdict.exit_code) == ("slower", True, 1)
    assert 1.4 < verdict.ci_low < verdict.ratio < verdict.ci_high < 1.6
    assert verdict.p_value < 0.05


def test_slower_within_the_threshold_passes_but_says_slower():
    verdict = gate(timing(noisy(10.0, seed=1)), timing(noisy(10.5, seed=2)), fail_if_slower_pct=10)
    assert (verdict.verdict, verdict.exit_code) == ("slower", 0)
    assert "within the allowed 10 %" in gate_lines(verdict)[1]
    assert gate(timing(noisy(10.0, seed=1)), timing(noisy(10.5, seed=2)), fail_if_slower_pct=1).exit_code == 1


def test_faster_passes():
    verdict = gate(timing(noisy(10.0, seed=1)), timing(noisy(7.0, seed=2)))
    assert (verdict.verdict, verdict.exit_code) == ("faster", 0)


def test_a_few_slow_outliers_do_not_fail_the_gate():
    """Medians, not means: three samples 10x slower in 64 move neither the ratio nor the verdict."""
    now = noisy(10.0, seed=2)
    now[5] = now[20] = now[40] = 100.0
    assert gate(timing(noisy(10.0, seed=1)), timing(now)).exit_code == 0


def test_two_constant_samples_need_no_bootstrap():
    assert gate(timing([5.0] * 10), timing([5.0] * 10)).verdict == "same"
    assert gate(timing([5.0] * 10), timing([8.0] * 10)).exit_code == 1



# -- ambiguous: the interval across the limit


def test_an_interval_across_the_limit_is_ambiguous_and_passes_with_exit_0():
    """11 against 10 at a 10 % limit: slower and significant, but the interval's low end is within 10 % and its high
    end past it; the ratio alone (past 1.10) failed this run before."""
    verdict = gate(timing(noisy(10.0, seed=1)), timing(noisy(11.0, seed=2)), fail_if_slower_pct=10)
    assert verdict.verdict == "slower" and verdict.significant and verdict.ratio > 1.10
    assert verdict.ci_low <= 1.10 < verdict.ci_high
    assert (verdict.ambiguous, verdict.failed, verdict.not_judged, verdict.exit_code) == (True, False, False, 0)
    line = gate_lines(verdict)[1]
    low, high = (verdict.ci_low - 1) * 100, (verdict.ci_high - 1) * 100
    assert line == (f"gate: AMBIGUOUS: 10.5 % slower, 95 % CI {low:+.1f} % to {high:+.1f} % across the allowed 10 %: "
                    "this run cannot tell whether it is past it; more iterations narrow the interval (exit 0)")
    assert not gate_lines(verdict, exit_code=False)[1].endswith(")")  # the app's pane: no exit code
    data = verdict.to_dict()
    assert (data["ambiguous"], data["failed"], data["exit_code"]) == (True, False, 0)


def test_the_whole_interval_on_one_side_of_the_limit_is_not_ambiguous():
    base = timing(noisy(10.0, seed=1))
    within = gate(base, timing(noisy(10.8, seed=2)), fail_if_slower_pct=10)  # high end 1.093
    past = gate(base, timing(noisy(11.2, seed=2)), fail_if_slower_pct=10)  # low end 1.115
    assert (within.ambiguous, within.exit_code, past.ambiguous, past.exit_code) == (False, 0, False, 1)
    assert gate_lines(within)[1].startswith("gate: passes: ") and gate_lines(past)[1].startswith("gate: FAILS: ")


def test_a_difference_too_noisy_to_be_significant_whose_interval_reaches_past_the_limit_is_ambiguous():
    rng = np.random.default_rng(3)
    verdict = gate(timing(list(10 * (1 + rng.normal(0, 0.15, 8)))), timing(list(10 * (1 + rng.normal(0, 0.15, 8)))))
    assert verdict.verdict == "same" and verdict.ci_high > 1.10
    assert (verdict.ambiguous, verdict.exit_code) == (True, 0)
    low, high = (verdict.ci_low - 1) * 100, (verdict.ci_high - 1) * 100
    assert gate_lines(verdict)[1].startswith(f"gate: AMBIGUOUS: no significant difference (-0.5 %), 95 % CI "
                                             f"{low:+.1f} % to {high:+.1f} % across the allowed 10 %: ")


def test_fail_if_ambiguous_fails_an_ambiguous_run_and_a_disturbed_one_is_not_judged():
    base, now = timing(noisy(10.0, seed=1)), timing(noisy(11.0, seed=2))
    verdict = gate(base, now, fail_if_slower_pct=10, fail_if_ambiguous=True)
    assert (verdict.ambiguous, verdict.failed, verdict.exit_code) == (True, True, 1)
    assert gate_lines(verdict)[1].startswith("gate: FAILS: AMBIGUOUS (--fail-if-ambiguous): 10.5 % slower, 95 % CI")
    assert gate_lines(verdict)[1].endswith("(exit 1)")
    disturbed = gate(base, dataclasses.replace(now, disturbed=["noisy host"]), fail_if_ambiguous=True)
    assert (disturbed.failed, disturbed.not_judged, disturbed.exit_code) == (False, True, 0)
    # Neither a clear pass nor a clear failure changes with the option.
    assert gate(base, timing(noisy(10.8, seed=2)), fail_if_ambiguous=True).exit_code == 0
    assert gate(base, timing(noisy(7.0, seed=2)), fail_if_ambiguous=True).exit_code == 0


# -- what differs


def test_differences_name_the_flags_and_what_the_command_line_set():
    base = timing(noisy(10.0), flags={**make_record().flags, "num_threads": 2})
    now = timing(noisy(18.0, seed=3), flags={**make_record().flags, "num_threads": 1})
    verdict = gate(base, now, typed=["threads"])
    assert verdict.differences == [("threads", 2, 1)] and verdict.typed == ["threads"]
    lines = gate_lines(verdict)
    assert lines[0].startswith("slower: ") and "95 % CI" in lines[0]
    assert lines[1].startswith("gate: FAILS: ") and "past the allowed 10 %" in lines[1]
    assert lines[2] == "differences: threads 2 -> 1 (from the command line)"
    assert lines[1].endswith("(exit 1)") and not gate_lines(verdict, exit_code=False)[1].endswith("(exit 1)")  # the app's


def test_the_environment_diff_names_versions_clocks_throttling_and_the_host_load():
    env = {"driver": "550.54.15", "torch": "2.11.0", "gpu_sm_clock_mhz": 1980, "gpu_power_limit_w": 700.0}
    base = timing(noisy(10.0), fingerprint=dict(env),
                  details={"host_noise": {"load": 0.3, "cores": 16, "other_busy_cores": 0.1, "host_noisy": False}})
    now = timing(noisy(10.0, seed=4),
                 fingerprint={**env, "driver": "560.35.03", "torch": "2.14.1", "gpu_sm_clock_mhz": 1410,
                              "gpu_power_limit_w": 400.0, "gpu_throttled": True, "gpu_throttled_share": 0.4,
                              "gpu_throttle_reasons": "power cap (software)"},
                 details={"host_noise": {"load": 9.0, "cores": 16, "other_busy_cores": 8.5, "host_noisy": True}})
    names = [name for name, _, _ in gate(base, now).environment]
    assert names == ["driver", "torch", "GPU power limit (W)", "GPU SM clock (MHz)", "GPU throttling", "CPU"]
    line = gate_lines(gate(base, now))[3]
    assert "driver 550.54.15 -> 560.35.03" in line and "GPU throttling no -> throttled 40 %: power cap" in line
    assert "other processes busy on 0.1 cores -> load 9.0 on 16 cores, other processes busy on 8.5 cores" in line


def test_readings_that_move_a_little_are_not_differences():
    base = timing(noisy(10.0), fingerprint={"gpu_sm_clock_mhz": 1980, "gpu_power_mean_w": 300.0})
    now = timing(noisy(10.0), fingerprint={"gpu_sm_clock_mhz": 1965, "gpu_power_mean_w": 310.0})
    assert gate(base, now).environment == []
    assert gate_lines(gate(base, now))[3] == (
        "environment: no difference (device, driver, CUDA, cuDNN, torch, host, GPU power limit and throttling the "
        "same; GPU SM clock within 5 %, GPU memory clock within 5 %, GPU power within 15 %, other processes' CPU within "
        "0.5 cores)")


# -- reading a REF


def bench_json(tmp_path, record: HistoryRecord, name: str = "base.json"):
    path = tmp_path / name
    path.write_text(json.dumps({"model": record.model, "stats": {}, "record": record.to_dict()}, indent=2))
    return path


def test_a_bench_json_file_is_a_baseline(tmp_path):
    record = timing(noisy(10.0))
    baseline = resolve_baseline(str(bench_json(tmp_path, record)))
    assert baseline.record.id == record.id and baseline.source.endswith("base.json")


def test_a_history_file_with_a_filter_takes_the_newest_match(tmp_path):
    path = tmp_path / "runs.jsonl"
    old, other, new = timing(noisy(10.0)), timing(noisy(10.0), model="vgg11"), timing(noisy(11.0))
    HistoryFile(path).extend([old, other, new])
    assert resolve_baseline(str(path), filter_text="model=resnet18").record.id == new.id
    assert resolve_baseline(str(path), filter_text="model=vgg11,dtype=float32").record.id == other.id
    assert resolve_baseline(str(path)).record.id == new.id  # no filter: the newest timing record
    with pytest.raises(BaselineError, match="no timing record in .* matches model=alexnet"):
        resolve_baseline(str(path), filter_text="model=alexnet")
    with pytest.raises(BaselineError, match="unknown key 'colour'"):
        resolve_baseline(str(path), filter_text="colour=red")


def test_an_id_or_a_unique_prefix_from_the_history(tmp_path):
    path = tmp_path / "history.jsonl"
    a, b = timing(noisy(10.0), id="abc123000000"), timing(noisy(10.0), id="abd456000000")
    HistoryFile(path).extend([a, b])
    assert resolve_baseline("abc1", history=path).record.id == a.id
    with pytest.raises(BaselineError, match="id ab is ambiguous .* 2 records start with it"):
        resolve_baseline("ab", history=path)
    with pytest.raises(BaselineError, match="no record with id ffff"):
        resolve_baseline("ffff", history=path)


@pytest.mark.parametrize("content, message", [
    ("{not json", "is not a baseline: neither a bench --json result"),
    ('{"model": "resnet18"}', "has no record: make the baseline with `bench MODEL --json"),
    ('[1, 2]', "is a JSON list, not a bench --json result"),
    ('{"record": {"id": "x"}}', "its record is corrupt: record lacks kind"),
    ('{"modes": []}', "bench --modes result"),
])
def test_a_corrupt_baseline_file_is_one_line(tmp_path, content, message):
    path = tmp_path / "base.json"
    path.write_text(content)
    with pytest.raises(BaselineError, match=message.replace("[", r"\[").replace("(", r"\(")):
        resolve_baseline(str(path))


def test_a_missing_file_a_record_without_samples_and_an_ab_arm_are_refused(tmp_path):
    with pytest.raises(BaselineError, match="no baseline file"):
        resolve_baseline(str(tmp_path / "gone.json"))
    with pytest.raises(BaselineError, match="keeps 0 samples, a gate needs at least 5"):
        resolve_baseline(str(bench_json(tmp_path, timing([]))))
    with pytest.raises(BaselineError, match="is a ab run: a baseline is a bench"):
        resolve_baseline(str(bench_json(tmp_path, timing(noisy(10.0), kind="ab"))))


def test_the_baselines_configuration_is_measured_again():
    record = timing(noisy(10.0, n=30), dtype="float16", channels_last=True, device="cpu",
                    flags={**make_record().flags, "num_threads": 2, "sdpa": "math", "unknown_later_flag": 1},
                    details={"warmup_iters": 7, "compile_mode": "eager", "step": "train", "optimizer": "adamw",
                             "amp": "bf16", "model_args": "num_hidden_layers=2", "seq_len": 16})
    cfg = config_of_record(record)
    assert (cfg.model, cfg.input_shape, cfg.dtype, cfg.channels_last, cfg.device) == \
        ("resnet18", (1, 3, 224, 224), "float16", True, "cpu")
    assert (cfg.flags.num_threads, cfg.flags.sdpa, cfg.warmup, cfg.iters, cfg.compile) == (2, "math", 7, 30, None)
    assert (cfg.step, cfg.optimizer, cfg.amp, cfg.model_args, cfg.seq_len) == \
        ("train", "adamw", "bf16", (("num_hidden_layers", "2"),), 16)


def asked_config(**changes):
    from torchperf_tui.engine.measurements.bench_config import BenchConfig
    from torchperf_tui.engine.measurements.flags import Flags

    return BenchConfig(**{**dict(
        model="hf:llama", input_shape=(2, 64), device="cpu", dtype="float32", warmup="auto", iters=64,
        flags=Flags(sdpa="math"), shapes="random:8-64", seed=7, step="train", optimizer="adamw", amp="bf16",
        compile="reduce-overhead", model_args=(("num_hidden_layers", "2"), ("rope_scaling", "{'type': 'linear'}")),
        seq_len=64, time_budget_s=30.0), **changes})


def test_a_record_keeps_its_runs_config_and_the_gate_reads_it_back_as_it_was_asked():
    # The record's details keep the options as words to show (model_args as text, the warm-up's count as it ran):
    # a gate rebuilt from them lost the seed of a random shape schedule and turned 'auto' into a count.
    cfg = asked_config()
    record = dataclasses.replace(
        timing(noisy(10.0, n=40)), model=cfg.model, input_shape=(2, 64), device="cpu",
        flags={**make_record().flags, "num_threads": 2, "sdpa": "math"},
        details={"warmup_iters": 13, "step": "infer"}, config=cfg.to_record())
    again = config_of_record(HistoryRecord.from_dict(json.loads(json.dumps(record.to_dict()))))
    for name in ("model", "input_shape", "device", "dtype", "warmup", "shapes", "seed", "step", "optimizer", "amp",
                 "compile", "model_args", "seq_len", "time_budget_s"):
        assert getattr(again, name) == getattr(cfg, name), name
    assert again.flags.num_threads == 2 and again.flags.sdpa == "math"  # the flags the run used
    assert again.iters == 40  # as many as it kept samples
    # a record from before configs were kept reads as it did, from its details
    older = config_of_record(dataclasses.replace(record, config={}))
    assert (older.warmup, older.step, older.seed, older.time_budget_s) == (13, "infer", 0, DEFAULT_TIME_BUDGET_S)
    # a run with no time budget is measured again with none (a gate stopped at the default's 60 s kept fewer samples)
    assert config_of_record(dataclasses.replace(record, config=asked_config(time_budget_s=None).to_record())
                            ).time_budget_s is None


def test_a_varying_schedules_seed_is_part_of_what_was_measured():
    record = dataclasses.replace(timing(noisy(10.0)), details={"shapes": "random:8-64"},
                                 config=asked_config(seed=7).to_record())
    assert record.setup()["seed"] == 7
    assert "seed" not in dataclasses.replace(record, config={}).setup()  # no config: its seed is not known
    assert "seed" not in timing(noisy(10.0)).setup()  # fixed shapes: the seed draws nothing that is timed


def test_a_record_without_a_config_writes_no_key_and_one_with_it_keeps_it_through_the_file(tmp_path):
    plain = timing(noisy(10.0))
    assert "config" not in plain.to_dict()
    kept = dataclasses.replace(plain, config=asked_config().to_record())
    history = HistoryFile(str(tmp_path / "h.jsonl"))
    history.append(kept)
    assert history.load().records[0].config == json.loads(json.dumps(asked_config().to_record()))


@pytest.mark.parametrize("changes, said", [
    ({"seed": -1}, "seed"),
    ({"warmup": 10**12}, "warm"),
    ({"model_args": "num_hidden_layers"}, "not KEY=VALUE"),
    ({"model_args": [["num_hidden_layers"]]}, "not a list of [key, value] pairs"),
    ({"model_args": [["2x", "1"]]}, "not a setting's name"),
    ({"step": "fly"}, "fly"),
    ({"shapes": "random:9-1"}, "random"),
    ({"compile": "fastest"}, "unknown compile mode 'fastest'"),
    ({"seq_len": "256x"}, "sequence length"),
    ({"seq_len": -5}, "sequence length"),
    ({"time_budget_s": -1}, "time budget"),
    ({"time_budget_s": 10**12}, "time budget"),
])
def test_a_config_from_a_file_is_checked_as_typed_options_are(changes, said):
    record = dataclasses.replace(timing(noisy(10.0)), config={**asked_config().to_record(), **changes})
    with pytest.raises(BaselineError) as caught:
        config_of_record(record, source="base.json")
    text = str(caught.value)
    assert text.startswith(f"the baseline {record.short_id} (base.json): ") and said in text and "\n" not in text


def test_reading_a_baseline_imports_no_torch(tmp_path):
    import subprocess

    path = bench_json(tmp_path, timing(noisy(10.0)))
    code = ("import sys; from torchperf_tui.engine.records.baseline import resolve_baseline; "
            "from torchperf_tui.engine.records.baseline_gate import gate; from torchperf_tui.wording.baseline import "
            f"gate_lines; r = resolve_baseline({str(path)!r}).record; gate_lines(gate(r, r)); "
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


# -- the samples kept compactly


def test_records_keep_samples_to_a_tenth_of_a_microsecond_and_old_lines_read_the_same():
    record = timing([12.345678901234, 0.0123456789, 7.0] * 2)
    assert record.to_dict()["samples_ms"][:3] == [12.3457, 0.0123, 7.0]
    assert HistoryRecord.from_dict(record.to_dict()).samples_ms[:3] == [12.3457, 0.0123, 7.0]
    old = {**record.to_dict(), "samples_ms": [12.345678901234, 7.0]}  # a line written before the rounding
    assert HistoryRecord.from_dict(old).samples_ms == [12.345678901234, 7.0]
    measured = timing(noisy(10.0))  # timer readings: full floats in memory, about half the bytes in the file
    assert len(json.dumps(measured.to_dict()["samples_ms"])) < len(json.dumps(measured.samples_ms)) * 0.6
