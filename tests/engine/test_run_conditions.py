"""The GPU's conditions beside a run (clocks, clock-event reasons, temperature, power, energy), on the fake NVML:
the summary a run carries, its words, the A/B note, and the wiring into run_benchmark, run_ab and the history."""

from __future__ import annotations

import itertools
import time

import pytest

from tests.fakes.fake_nvml import NVML_ERROR_NOT_SUPPORTED, FakeGpu, FakeNvml
from torchperf_tui.engine.hardware.condition_sampler import ConditionSampler
from torchperf_tui.engine.hardware.nvml import Nvml
from torchperf_tui.engine.hardware.run_conditions import THROTTLE_MASK, RunConditions, reason_names, throttle_note

POWER_CAP = 0x4  # nvmlClocksEventReasonSwPowerCap
IDLE = 0x1


def _sampler(gpu: FakeGpu | None = None, period_s=None, module=None):
    fake = module or FakeNvml(gpus=[gpu or FakeGpu()])
    ticks = itertools.count()
    return fake, ConditionSampler(Nvml.open(fake), 0, period_s=period_s, clock=lambda: float(next(ticks)))


def test_a_window_reads_clocks_temperature_power_and_the_energy_counter_at_its_edges():
    fake, sampler = _sampler(FakeGpu(sm_clock_mhz=1980, mem_clock_mhz=2619, temperature_c=40, power_mw=300_000,
                                     energy_mj=5_000_000))
    gpu = fake.gpus[0]
    sampler.begin("timed")
    gpu.temperature_c, gpu.sm_clock_mhz = 55, 1755
    sampler.sample()
    gpu.energy_mj += 12_500  # 12.5 J over the window
    gpu.temperature_c, gpu.sm_clock_mhz = 61, 1980
    sampler.end("timed")
    c = sampler.summary("timed", items=50)
    assert c.readings == 3 and c.window_s == 2.0  # the fake clock ticks once per reading
    assert c.sm_clock_mhz == 1980 and c.sm_clock_min_mhz == 1755 and c.sm_clock_max_mhz == 1980
    assert c.mem_clock_mhz == 2619
    assert (c.temperature_start_c, c.temperature_max_c) == (40, 61)
    assert c.power_mean_w == pytest.approx(300.0)
    assert c.energy_j == pytest.approx(12.5) and c.energy_method.startswith("NVML energy counter")
    assert c.energy_per_item_j == pytest.approx(0.25) and c.items_per_joule == pytest.approx(4.0)
    assert not c.throttled and c.throttled_share == 0.0 and c.reasons == {"GPU idle": 1.0}
    assert "250 mJ per inference (4 inferences per J; NVML energy counter" in c.energy_text()
    assert "not throttled" in c.summary() and "40-61 °C" in c.summary()


def test_readings_outside_the_window_do_not_count():
    fake, sampler = _sampler(FakeGpu(temperature_c=90))
    sampler.sample()  # before the window: a hot GPU that cooled
    fake.gpus[0].temperature_c = 50
    sampler.begin("timed")
    sampler.end("timed")
    fake.gpus[0].temperature_c = 95
    sampler.sample()  # after it
    assert sampler.summary("timed", items=1).temperature_max_c == 50


def test_a_power_cap_in_some_readings_is_throttling_said_with_its_share_and_the_clocks():
    fake, sampler = _sampler(FakeGpu(sm_clock_mhz=1980, clock_event_reasons=0))
    gpu = fake.gpus[0]
    sampler.begin("timed")
    gpu.clock_event_reasons, gpu.sm_clock_mhz = POWER_CAP, 1410
    sampler.sample()
    sampler.sample()
    gpu.clock_event_reasons, gpu.sm_clock_mhz = 0, 1980
    sampler.end("timed")
    c = sampler.summary("timed", items=4)
    assert c.throttled and c.throttled_share == pytest.approx(0.5)
    assert c.reasons == {"power cap (software)": 0.5} and c.slowdown_reasons == ["power cap (software)"]
    text = c.throttle_text()
    assert text.startswith("throttled: power cap (software) in 50 % of 4 readings") and "lowest 1410" in text
    assert "THROTTLED 50 %: power cap (software)" in c.summary() and "THROTTLED 50 %" in c.short()
    assert c.fingerprint()["gpu_throttled"] is True and c.fingerprint()["gpu_throttled_share"] == 0.5
    assert c.fingerprint()["gpu_throttle_reasons"] == "power cap (software)"


def test_idle_application_clocks_and_sync_boost_are_not_throttling():
    benign = 0x1 | 0x2 | 0x10 | 0x100
    assert benign & THROTTLE_MASK == 0
    _, sampler = _sampler(FakeGpu(clock_event_reasons=benign))
    sampler.begin("timed")
    sampler.end("timed")
    c = sampler.summary("timed", items=1)
    assert not c.throttled and set(c.reasons) == set(reason_names(benign))


def test_without_the_energy_counter_the_power_readings_times_the_window_stand_in_and_say_so():
    fake, sampler = _sampler(FakeGpu(power_mw=250_000))
    fake.fail("nvmlDeviceGetTotalEnergyConsumption", NVML_ERROR_NOT_SUPPORTED)
    sampler.begin("timed")
    sampler.end("timed")
    c = sampler.summary("timed", items=10)
    assert c.energy_j == pytest.approx(250.0 * 1.0)  # 250 W over the one-second window of the fake clock
    assert c.energy_method.startswith("mean NVML power x wall time") and "not supported" in c.energy_method


def test_a_counter_that_did_not_move_is_not_zero_joules():
    _, sampler = _sampler(FakeGpu(power_mw=100_000))
    sampler.begin("timed")
    sampler.end("timed")
    c = sampler.summary("timed", items=10)
    assert c.energy_j == pytest.approx(100.0) and "did not move" in c.energy_method


def test_an_old_nvidia_ml_py_with_only_the_throttle_reasons_query_is_read_through_it():
    class OldBinding(FakeNvml):
        def __getattribute__(self, name):
            if name == "nvmlDeviceGetCurrentClocksEventReasons":
                raise AttributeError(name)
            return super().__getattribute__(name)

        def nvmlDeviceGetCurrentClocksThrottleReasons(self, handle):
            return self._enter("nvmlDeviceGetCurrentClocksThrottleReasons", handle).clock_event_reasons

    fake = OldBinding(gpus=[FakeGpu(clock_event_reasons=0x20)])
    _, sampler = _sampler(module=fake)
    sampler.begin("timed")
    sampler.end("timed")
    c = sampler.summary("timed", items=1)
    assert c.throttled and c.slowdown_reasons == ["thermal slowdown (software)"]
    assert fake.calls["nvmlDeviceGetCurrentClocksThrottleReasons"] == 2


def test_unreadable_reasons_say_throttling_is_unknown_not_absent():
    fake, sampler = _sampler()
    fake.fail("nvmlDeviceGetCurrentClocksEventReasons", NVML_ERROR_NOT_SUPPORTED)
    sampler.begin("timed")
    sampler.end("timed")
    c = sampler.summary("timed", items=1)
    assert c.throttled_share is None and not c.throttled
    assert "throttling n/a (not supported on this GPU)" in c.summary()
    assert c.fingerprint()["gpu_throttled"] is None


def test_without_nvml_the_conditions_say_why_and_claim_nothing():
    fake = FakeNvml()
    fake.fail_init(18)  # driver/library mismatch
    sampler = ConditionSampler(Nvml.open(fake), None, unavailable="NVML init failed: versions differ")
    sampler.begin("timed")
    sampler.end("timed")
    c = sampler.summary("timed", items=8)
    assert c.gpu_index is None and c.energy_per_item_j is None and not c.throttled
    assert c.summary() == "GPU clocks, power and energy n/a (NVML init failed: versions differ)"
    assert ConditionSampler.unavailable("no NVML").summary("x", 1).missing["nvml"] == "no NVML"


def test_windows_are_summed_per_label_and_an_unclosed_window_is_left_out():
    fake, sampler = _sampler(FakeGpu(energy_mj=0))
    gpu = fake.gpus[0]
    for label, joules in (("A0", 1), ("B0", 3), ("A1", 1), ("B1", 3)):
        sampler.begin(label)
        gpu.energy_mj += joules * 1000
        sampler.end(label)
    sampler.begin("A2")  # cancelled: never closed
    gpu.energy_mj += 100_000
    a = sampler.summary(["A0", "A1", "A2"], items=4)
    b = sampler.summary(["B0", "B1"], items=4)
    assert a.energy_j == pytest.approx(2.0) and b.energy_j == pytest.approx(6.0)
    assert a.window_s == 2.0 and a.readings == 4


def test_energy_over_windows_shorter_than_the_counters_steps_is_not_judged_and_says_why():
    # As on an H200: A/B blocks of 50 ms, each window's counter delta a step of the counter, not the work.
    fake = FakeNvml(gpus=[FakeGpu(energy_mj=0)])
    ticks = itertools.count()
    sampler = ConditionSampler(Nvml.open(fake), 0, period_s=None, clock=lambda: next(ticks) * 0.05)
    gpu = fake.gpus[0]
    for label, joules in (("A0", 1), ("B0", 0), ("A1", 1), ("B1", 0), ("A2", 0), ("B2", 1)):
        sampler.begin(label)
        gpu.energy_mj += joules * 1000
        sampler.end(label)
    a = sampler.summary(["A0", "A1", "A2"], items=60)
    assert a.windows == 3 and a.window_median_s == pytest.approx(0.05) and a.window_s == pytest.approx(0.15)
    assert a.energy_j == pytest.approx(2.0)  # the counter's delta is kept (the JSON has it) ...
    assert a.energy_per_item_j is None and a.items_per_joule is None  # ... but no figure per inference
    assert a.energy_text() == (
        "energy n/a per inference: each timed window lasted 50 ms (median of 3), and NVML's energy counter and power "
        "move in steps too coarse for windows under 1 s: longer windows give a figure (more timed iterations: "
        "--iters, or an A/B's --per-block)")
    assert "energy n/a (50 ms windows)" in a.short() and "mJ" not in a.short()
    assert a.fingerprint()["gpu_energy_per_item_j"] is None and a.fingerprint()["gpu_energy_window_s"] == 0.05
    assert a.to_dict()["energy_j"] == pytest.approx(2.0) and a.to_dict()["window_median_s"] == pytest.approx(0.05)
    # Windows of a second and more are judged, the median of them deciding.
    long = ConditionSampler(Nvml.open(FakeNvml(gpus=[FakeGpu(energy_mj=0)])), 0, period_s=None,
                            clock=lambda: float(next(ticks)))
    long.begin("timed")
    long.nvml.module.gpus[0].energy_mj += 3000
    long.end("timed")
    c = long.summary("timed", items=30)
    assert c.windows == 1 and c.window_median_s == pytest.approx(1.0)
    assert c.energy_per_item_j == pytest.approx(0.1) and "100 mJ per inference" in c.energy_text()


def test_ticks_between_iterations_read_once_a_period_has_passed():
    fake = FakeNvml()
    now = [0.0]
    sampler = ConditionSampler(Nvml.open(fake), 0, period_s=0.1, clock=lambda: now[0])
    sampler.begin("timed")
    for _ in range(100):  # a 5 ms iteration, ticked between iterations: a reading every 0.1 s of them
        now[0] += 0.005
        sampler.tick()
    sampler.end("timed")
    c = sampler.summary("timed", items=100)
    assert c.readings == 2 + 5  # the edges, and a reading at each 0.1 s of the 0.5 s (not one per iteration)
    assert fake.calls["nvmlDeviceGetTotalEnergyConsumption"] == 7
    edges_only = ConditionSampler(Nvml.open(FakeNvml()), 0, period_s=None, clock=lambda: now[0])
    edges_only.tick()
    assert edges_only.summary("timed", items=1).readings == 0


def test_a_power_cap_in_one_reading_of_a_long_run_is_brief_not_a_throttled_run():
    fake, sampler = _sampler(FakeGpu(clock_event_reasons=0))
    sampler.begin("timed")
    fake.gpus[0].clock_event_reasons = POWER_CAP
    sampler.sample()
    fake.gpus[0].clock_event_reasons = 0
    for _ in range(40):
        sampler.sample()
    sampler.end("timed")
    c = sampler.summary("timed", items=1)
    assert not c.throttled and c.throttled_share == pytest.approx(1 / 43)
    assert c.throttle_word() == "briefly throttled (2 %: power cap (software))"
    assert c.throttle_text().startswith("briefly throttled: power cap (software) in 2 % of 43 readings")
    assert throttle_note(c, _conditions(0.0, c.sm_clock_mhz)) is None  # no A/B note for one reading


def _conditions(share: float, sm: float, reasons=None) -> RunConditions:
    return RunConditions(gpu_index=0, readings=20, window_s=2.0, windows=1, window_median_s=2.0, sm_clock_mhz=sm, sm_clock_max_mhz=1980,
                         reasons=reasons if reasons is not None else ({"power cap (software)": share} if share else {}),
                         throttled_share=share, items=10)


def test_the_ab_note_names_the_arm_that_throttled_more():
    note = throttle_note(_conditions(0.0, 1980), _conditions(0.45, 1650))
    assert note.startswith("B ran throttled more than A (power cap (software) in 45 % of its readings, 0 % of A's")
    assert "1650 MHz vs 1980 MHz" in note
    assert throttle_note(_conditions(0.5, 1650), _conditions(0.0, 1980)).startswith("A ran throttled more than B")


def test_no_ab_note_when_the_arms_ran_alike():
    assert throttle_note(_conditions(0.2, 1800), _conditions(0.25, 1790)) is None
    assert throttle_note(_conditions(0.0, 1980), _conditions(0.0, 1975)) is None
    assert throttle_note(None, _conditions(0.5, 1500)) is None


def test_a_clock_gap_without_reasons_is_noted_as_a_share_of_the_higher_clock():
    note = throttle_note(_conditions(0.0, 1980), _conditions(0.0, 1800))
    assert note is not None and "9 % lower during B's blocks" in note
    note = throttle_note(_conditions(0.0, 1800), _conditions(0.0, 1980))  # A the lower: still 9 %, not 10 %
    assert note is not None and "9 % lower during A's blocks (median 1800 MHz for A, 1980 MHz for B)" in note


# -- the wiring: a CPU run reads the fake NVML as a GPU run reads the real one ---------------------------------
TINY = "tests.tinymodels:tiny_cnn"


def test_a_run_carries_its_conditions_over_its_timed_iterations_into_its_result_json_and_history(fake_gpu_conditions):
    from torchperf_tui.engine.records.result_records import records_of
    from torchperf_tui.engine.measurements.bench_config import BenchConfig
    from torchperf_tui.engine.measurements.timing import run_benchmark

    result = run_benchmark(BenchConfig(model=TINY, input_shape=(2, 3, 16, 16), device="cpu", warmup=1, iters=5))
    c = result.conditions
    assert c is not None and c.items == 10 and c.readings == 2  # the window's two edges, no thread here
    assert c.energy_j == pytest.approx(1.0) and c.energy_per_item_j == pytest.approx(0.1)
    assert result.to_dict()["conditions"]["energy_per_item_j"] == pytest.approx(0.1)
    record = records_of(result, fingerprint={"device_name": "fake"})[0]
    assert record.fingerprint["gpu_energy_per_item_j"] == pytest.approx(0.1)
    assert record.fingerprint["gpu_throttled"] is False and record.fingerprint["device_name"] == "fake"


def test_a_cpu_run_has_no_gpu_conditions():
    from torchperf_tui.engine.records.result_records import records_of
    from torchperf_tui.engine.measurements.bench_config import BenchConfig
    from torchperf_tui.engine.measurements.timing import run_benchmark

    result = run_benchmark(BenchConfig(model=TINY, input_shape=(1, 3, 8, 8), device="cpu", warmup=0, iters=2))
    assert result.conditions is None and result.to_dict()["conditions"] is None
    assert not any(key.startswith("gpu_") for key in records_of(result, fingerprint={})[0].fingerprint)


def test_the_ab_verdict_notes_the_arm_that_throttled_more_and_each_record_keeps_its_own(fake_gpu_conditions):
    from torchperf_tui.engine.measurements.ab_arms import parse_arm_spec
    from torchperf_tui.engine.measurements.abtest import run_ab
    from torchperf_tui.engine.records.result_records import records_of
    from torchperf_tui.engine.measurements.bench_config import BenchConfig

    base = BenchConfig(model=TINY, input_shape=(1, 3, 8, 8), device="cpu")
    result = run_ab(base, parse_arm_spec("threads=2"), parse_arm_spec("threads=1"), blocks=6, per_block=2)
    a, b = result.a.conditions, result.b.conditions
    assert a.items == b.items == 12 and a.readings == b.readings == 12  # two edges per block
    assert a.energy_j == pytest.approx(6.0) and not a.throttled
    assert b.throttled and b.throttled_share == 1.0
    assert any(note.startswith("B ran throttled more than A (power cap (software)") for note in result.notes)
    records = records_of(result, fingerprint={})
    assert [r.fingerprint["gpu_throttled"] for r in records] == [False, True]
    assert result.to_dict()["b"]["conditions"]["throttled"] is True


def test_timing_modes_give_each_mode_its_energy_and_say_when_they_all_throttled(fake_gpu_conditions):
    from torchperf_tui.engine.measurements.flags import Flags
    from torchperf_tui.engine.measurements.bench_config import BenchConfig
    from torchperf_tui.engine.measurements.timing_modes import run_modes

    cfg = BenchConfig(model=TINY, input_shape=(1, 3, 8, 8), device="cpu", warmup=1, iters=6,
                      flags=Flags(num_threads=1))
    result = run_modes(cfg, ("sync", "pipelined"))
    sync, pipelined = result.mode("sync").conditions, result.mode("pipelined").conditions
    assert sync.items == 6 and pipelined.items == 9 * 10  # nine blocks of ten iterations
    assert sync.energy_j == pytest.approx(3.0) and pipelined.energy_j == pytest.approx(3.0)  # 1 J a round
    assert "energy per inference: sync 500 mJ · pipelined 33.3 mJ (NVML energy counter" in result.findings[-2]
    assert result.findings[-1].startswith("the modes ran throttled alike (power cap (software))")
    assert result.to_dict()["modes"][0]["conditions"]["energy_per_item_j"] == pytest.approx(0.5)


def test_a_mode_that_throttled_more_than_sync_is_named():
    from torchperf_tui.engine.measurements.timing_modes import ModeResult, ModesResult, conditions_findings
    from torchperf_tui.engine.measurements.flags import Flags

    modes = [ModeResult("sync", conditions=_conditions(0.0, 1980)), ModeResult("graph", conditions=_conditions(0.6, 1600))]
    result = ModesResult(model="m", device="cuda:0", input_shape=(1,), dtype="float32", step="infer", flags=Flags(),
                         modes=modes, per_block=10, rounds=3)
    lines = conditions_findings(result)
    assert lines == ["graph ran throttled more than sync (power cap (software) in 60 % of its readings, 0 % of "
                     "sync's; SM clock median 1600 MHz vs 1980 MHz): part of the gap between them may be the clocks"]


@pytest.mark.gpu
def test_a_cuda_run_reads_the_real_gpus_clocks_and_energy():
    from torchperf_tui.engine.measurements.bench_config import BenchConfig
    from torchperf_tui.engine.measurements.timing import run_benchmark

    # 1,000 iterations of batch 64 last a few seconds even on an H200 (about 2 ms each): a window long enough for
    # the energy counter's steps, so that the energy is judged (run_conditions.SHORT_WINDOW_S).
    result = run_benchmark(BenchConfig(model="resnet18", batch=64, device="cuda", warmup=5, iters=1000))
    c = result.conditions
    assert c is not None and c.gpu_index is not None, c and c.missing
    assert c.readings >= 2 and c.sm_clock_mhz and c.sm_clock_mhz > 0 and c.items == 64_000
    assert c.windows == 1 and c.window_median_s >= 1.0, c.window_median_s
    assert c.temperature_max_c is not None and c.power_mean_w and c.power_mean_w > 0
    assert c.energy_per_item_j is not None and c.energy_per_item_j > 0, c.missing
    assert c.throttled_share is not None, c.missing


def test_a_cancelled_modes_run_keeps_only_the_windows_that_timed_something(fake_gpu_conditions):
    from torchperf_tui.engine.measurements.bench_config import BenchConfig
    from torchperf_tui.engine.measurements.timing_modes import run_modes

    calls = {"n": 0}

    def cancel_after_a_few():
        calls["n"] += 1
        return calls["n"] > 8

    cfg = BenchConfig(model=TINY, input_shape=(1, 3, 8, 8), device="cpu", warmup=1, iters=30)
    result = run_modes(cfg, ("sync", "pipelined"), should_cancel=cancel_after_a_few)
    assert result.cancelled
    for mode in result.modes:
        c = mode.conditions
        per_sample = 10 if mode.mode == "pipelined" else 1
        assert c.items == len(mode.samples_ms) * per_sample
        # one window per round that timed anything: its two edges, each 1 J further on the fake counter
        windows = c.readings // 2
        assert windows <= 1 and c.energy_j == pytest.approx(windows or None)


def test_energy_is_said_without_exponents():
    from torchperf_tui.core.formatting import format_energy

    assert [format_energy(v) for v in (0.9999995, 999.9999, 0.0375, 4.2e-5, 0)] == ["1 J", "1,000 J", "37.5 mJ",
                                                                                   "42 µJ", "0 J"]
    c = RunConditions(gpu_index=0, window_s=2.0, windows=1, window_median_s=2.0, energy_j=0.5, items=800,
                      energy_method="m")
    assert c.energy_text().startswith("625 µJ per inference (1,600 inferences per J; m, over 2.0 s)")


def test_a_run_ticks_the_sampler_between_its_timed_iterations(monkeypatch):
    from torchperf_tui.engine.measurements.bench_config import BenchConfig
    from torchperf_tui.engine.measurements.timing import run_benchmark

    fake = FakeNvml()
    made = []

    def every_iteration(device, period_s=None):  # a period of 0: a reading at every tick
        made.append(ConditionSampler(Nvml.open(fake), 0, period_s=0.0))
        return made[-1]

    monkeypatch.setattr("torchperf_tui.engine.measurements.timing.conditions_sampler", every_iteration)
    result = run_benchmark(BenchConfig(model=TINY, input_shape=(1, 3, 8, 8), device="cpu", warmup=3, iters=6))
    # the window's two edges and a tick before each timed iteration after the first; none in the warm-up
    assert result.conditions.readings == 2 + 5


def test_an_ab_and_the_timing_modes_tick_the_sampler_between_their_samples(monkeypatch):
    from torchperf_tui.engine.measurements.ab_arms import parse_arm_spec
    from torchperf_tui.engine.measurements.abtest import run_ab
    from torchperf_tui.engine.measurements.bench_config import BenchConfig
    from torchperf_tui.engine.measurements.timing_modes import run_modes

    def every_iteration(device, period_s=None):
        return ConditionSampler(Nvml.open(FakeNvml()), 0, period_s=0.0)

    for module in ("abtest", "timing_modes"):
        monkeypatch.setattr(f"torchperf_tui.engine.measurements.{module}.conditions_sampler", every_iteration)
    base = BenchConfig(model=TINY, input_shape=(1, 3, 8, 8), device="cpu", warmup=1, iters=6)
    result = run_ab(base, parse_arm_spec(""), parse_arm_spec("threads=1"), blocks=6, per_block=3)
    assert result.a.conditions.readings == result.b.conditions.readings == 6 * (2 + 2)  # per block: edges, 2 ticks
    modes = run_modes(base, ("sync", "pipelined"))  # 3 rounds: sync 2 samples a round, pipelined 3 blocks
    assert modes.mode("sync").conditions.readings == 3 * (2 + 1)
    assert modes.mode("pipelined").conditions.readings == 3 * (2 + 2)


def test_the_throughput_search_reads_the_gpu_over_its_final_measurement_only(fake_gpu_conditions):
    from torchperf_tui.engine.measurements.throughput import find_max_batch
    from torchperf_tui.engine.measurements.bench_config import BenchConfig

    cfg = BenchConfig(model=TINY, input_shape=(1, 3, 8, 8), device="cpu")
    result = find_max_batch(cfg, max_batch=8, try_iters=2, measure_iters=5)
    c = result.conditions
    # one window, the measurement's two edges (1 J apart on the fake counter): the tries are not in it
    assert c.readings == 2 and c.energy_j == pytest.approx(1.0)
    assert c.items == result.measurement.iters * result.best_batch == 5 * result.best_batch
    assert result.to_dict()["conditions"]["items"] == c.items


def test_the_throughput_texts_say_the_gpu_at_the_best_batch(fake_gpu_conditions, capsys):
    from torchperf_tui.app.widgets.throughput.throughput_pane import throughput_summary
    from torchperf_tui.cli.render import render_throughput
    from torchperf_tui.engine.measurements.flags import Flags
    from torchperf_tui.engine.measurements.throughput import find_max_batch
    from torchperf_tui.engine.measurements.bench_config import BenchConfig

    cfg = BenchConfig(model=TINY, input_shape=(1, 3, 8, 8), device="cpu", flags=Flags(num_threads=1))
    result = find_max_batch(cfg, max_batch=4, try_iters=2, measure_iters=4)
    assert f"GPU at batch {result.best_batch}: SM 345/1980 MHz" in throughput_summary(result)
    assert "THROTTLED 100 %: power cap (software)" in throughput_summary(result)
    render_throughput(result)
    out = capsys.readouterr().out
    assert f"GPU during the measurement at batch {result.best_batch}" in out and "per inference" in out


def test_the_gpm_counters_are_read_between_each_windows_edges_and_weighted_by_its_length():
    """A Hopper GPU's GPM: a sample at each edge of a window, the metrics NVML computes between them, each label's
    windows weighted by their lengths; every sample freed (engine/hardware/gpm.py)."""
    fake, sampler = _sampler(FakeGpu(gpm={2: 80.0, 3: 40.0, 5: 60.0, 10: 30.0}))
    gpu = fake.gpus[0]
    sampler.begin("A")
    sampler.end("A")  # a window of one tick
    gpu.gpm = {2: 20.0, 3: 10.0, 5: 0.0, 10: 90.0}
    sampler.begin("A")
    sampler.sample()
    sampler.sample()
    sampler.end("A")  # three ticks: weighs 3 to 1
    sampler.begin("B")
    sampler.discard("B")  # a cancelled block: its sample freed, no window
    c = sampler.summary("A", items=10)
    assert c.gpm == pytest.approx({"sm_active": (80 + 3 * 20) / 4, "sm_occupancy": (40 + 3 * 10) / 4,
                                   "tensor_active": 60 / 4, "dram_active": (30 + 3 * 90) / 4})
    assert "SM active 35 % · occupancy 18 % · tensor 15 % · DRAM 75 %" in c.short()
    assert c.fingerprint()["gpu_gpm_sm_active_pct"] == 35.0 and "gpm" not in c.missing
    assert fake.gpm_samples_alive == 0


def test_a_gpu_without_gpm_says_so_once_and_reads_no_counters():
    from torchperf_tui.engine.hardware.gpm import NO_GPM

    fake, sampler = _sampler(FakeGpu(name="NVIDIA A100-SXM4-80GB", compute_capability=(8, 0)))
    sampler.begin("timed")
    sampler.end("timed")
    c = sampler.summary("timed", items=1)
    assert c.gpm == {} and c.missing["gpm"] == NO_GPM and "SM active" not in c.short()
    assert fake.calls["nvmlGpmSampleAlloc"] == 0  # asked once whether it has any, then never sampled


def test_gpm_that_fails_mid_run_is_said_and_leaves_the_rest_of_the_readings():
    fake, sampler = _sampler(FakeGpu(gpm={2: 50.0}))
    fake.fail("nvmlGpmMetricsGet", NVML_ERROR_NOT_SUPPORTED)
    sampler.begin("timed")
    sampler.end("timed")
    c = sampler.summary("timed", items=1)
    assert c.gpm == {} and c.missing["gpm"] == "not supported on this GPU" and c.sm_clock_mhz is not None
    assert fake.gpm_samples_alive == 0
