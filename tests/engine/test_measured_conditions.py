"""Every measurement carries its conditions as a timed run does (engine/hardware/host_noise.py): the host judged by
the CPU other processes used over the measured windows, never by the lagging load average alone; and each result
kind (time per layer, the roofline of a run with its layers, a throughput search per try, the timing modes per mode,
a sweep per length, generation and its A/B, the kernels' A/B per arm) marked when the host was busy and not when it
was quiet under a high load average. The host is a fake reader (the HostReader seam)."""

from __future__ import annotations

import pytest

from tests.engine.test_host_noise import QUIET, FakeReader
from torchperf_tui.engine.measurements.bench_config import BenchConfig
from torchperf_tui.engine.hardware.host_noise import HostProbe, point_marks
from torchperf_tui.engine.workloads.model_args import parse_model_args

TINY = "tests.tinymodels:tiny_cnn"
TINY_LLAMA = parse_model_args("num_hidden_layers=2,hidden_size=64,intermediate_size=128,num_attention_heads=4,"
                              "num_key_value_heads=4,vocab_size=256,max_position_embeddings=64")
BUSY = 1.5  # other processes' cores on a busy host (a CPU burner and a build)
QUIET_LOAD = 8.4  # a load average left high by what ran a minute ago, over a host that is quiet now


class ScriptedHost:
    """A host on which other processes hold `other` cores and this process 1 core all along, the load average
    `load` throughout; each reading is a second after the one before (any number of windows)."""

    def __init__(self, other: float, load: float, cores: int = 2) -> None:
        self.other, self.load_average, self._cores = other, load, cores
        self.t = 0.0
        self.missing: dict[str, str] = {}

    def now(self) -> float:
        self.t += 1.0
        return self.t

    def load(self) -> float:
        return self.load_average

    def busy_cpu_s(self) -> float:
        return self.t * (self.other + 1.0)

    def own_cpu_s(self) -> float:
        return self.t

    def cores(self) -> int:
        return self._cores


@pytest.fixture
def host(monkeypatch):
    """host(other, load, *modules): every HostProbe those modules make reads a ScriptedHost of its own."""

    def install(other: float, load: float, *modules: str) -> None:
        def probe(reader=None, during: str = "the timed run") -> HostProbe:
            return HostProbe(ScriptedHost(other, load), during=during)

        for module in modules:
            monkeypatch.setattr(f"torchperf_tui.engine.{module}.HostProbe", probe)

    return install


def busy_line(during: str) -> str:
    return f"noisy host: load 1.0 on 2 cores, other processes busy on 1.5 of them during {during}"


def windows(probe: HostProbe, count: int) -> HostProbe:
    for _ in range(count):
        probe.begin()
        probe.end()
    return probe


# -- the judgement ------------------------------------------------------------------------------------------------

def test_a_quiet_window_is_not_called_noisy_however_high_the_load_average():
    noise = windows(HostProbe(ScriptedHost(0.0, QUIET_LOAD)), 1).summary(QUIET)
    assert noise.other_busy_cores == pytest.approx(0.0) and noise.load == QUIET_LOAD
    assert not noise.host_noisy and noise.warnings() == []
    assert noise.summary().startswith("load 8.4 on 2 cores, other processes busy on 0.0 of them")  # as context
    # where the CPU times cannot be read, the load average is all there is: it judges there alone
    blind = FakeReader((0.0, QUIET_LOAD, None, None), (2.0, QUIET_LOAD, None, None),
                       missing={"cpu": "psutil could not read the CPU times: AccessDenied"})
    probe = windows(HostProbe(blind), 1)
    assert probe.summary(QUIET).warnings() == ["noisy host: load 8.4 on 2 cores during the timed run"]


def test_one_clock_tick_in_a_window_of_milliseconds_is_not_a_busy_host():
    # 2 ms in which the machine's counter moved one tick (10 ms) and this process's none: 5 cores by the figure
    tick = windows(HostProbe(FakeReader((0.0, 1.0, 100.0, 50.0), (0.002, 1.0, 100.01, 50.0))), 1).summary(QUIET)
    assert tick.other_busy_cores == pytest.approx(2.0)  # no more than the machine has
    assert not tick.host_noisy and "(±25.0 over 2 ms)" in tick.summary()
    # the same rate held over 2 s is other processes busy
    held = windows(HostProbe(FakeReader((0.0, 1.0, 100.0, 50.0), (2.0, 1.0, 104.0, 52.0))), 1).summary(QUIET)
    assert held.other_busy_cores == pytest.approx(1.0) and held.host_noisy and "±" not in held.summary()


def test_the_windows_of_one_probe_add_up_and_a_window_never_ended_is_dropped():
    probe = HostProbe(ScriptedHost(BUSY, 1.0), during="its shares of the rounds")
    probe.begin()  # never ended: its start is read again by the next begin
    windows(probe, 3)
    noise = probe.summary([])
    assert noise.windows == 3 and noise.window_s == pytest.approx(3.0)
    assert noise.other_busy_cores == pytest.approx(BUSY) and noise.warnings() == [busy_line("its shares of the rounds")]
    assert noise.to_dict()["noisy"] is True and noise.to_dict()["windows"] == 3


def test_marks_are_said_per_point_and_the_whole_window_only_where_no_point_can_tell():
    busy = windows(HostProbe(ScriptedHost(BUSY, 1.0), during="x"), 1).summary([])
    quiet = windows(HostProbe(ScriptedHost(0.0, QUIET_LOAD), during="x"), 1).summary([])
    assert point_marks([("batch 1 (grow)", quiet), ("batch 2 (grow)", busy)], busy) == [
        f"batch 2 (grow): {busy_line('x')}"]
    assert point_marks([("batch 1 (grow)", None)], busy) == [busy_line("x")]
    assert point_marks([("batch 1 (grow)", quiet)], quiet) == []


# -- each result kind ---------------------------------------------------------------------------------------------

def test_time_per_layer_is_marked_when_the_host_was_busy_and_not_under_a_high_load_alone(host):
    from torchperf_tui.engine.analysis.layer_times import layer_times

    cfg = BenchConfig(model=TINY, input_shape=(1, 3, 16, 16), device="cpu")
    host(BUSY, 1.0, "analysis.layer_times")
    busy = layer_times(cfg, iters=2, warmup=1)
    assert busy.disturbance_marks() == [busy_line("the passes timed per layer")]
    data = busy.to_dict()
    assert data["disturbance_marks"] == busy.disturbance_marks() and data["host_noise"]["host_noisy"] is True
    host(0.0, QUIET_LOAD, "analysis.layer_times")
    assert layer_times(cfg, iters=2, warmup=1).disturbance_marks() == []


def test_the_roofline_of_a_run_with_its_layers_carries_the_runs_marks_and_the_layers(host):
    from torchperf_tui.engine.measurements.timing import run_benchmark
    from torchperf_tui.measure.follow_up import layer_times_of_run

    host(BUSY, 1.0, "measurements.timing", "analysis.layer_times")
    run = run_benchmark(BenchConfig(model=TINY, input_shape=(1, 3, 16, 16), device="cpu", warmup=1, iters=4))
    roofline = layer_times_of_run(run, iters=2)
    assert roofline.disturbance_marks() == [busy_line("the timed run"),
                                            f"time per layer: {busy_line('the passes timed per layer')}"]
    assert roofline.to_dict()["disturbance_marks"] == roofline.disturbance_marks()
    host(0.0, QUIET_LOAD, "measurements.timing", "analysis.layer_times")
    quiet = run_benchmark(BenchConfig(model=TINY, input_shape=(1, 3, 16, 16), device="cpu", warmup=1, iters=4))
    assert layer_times_of_run(quiet, iters=2).disturbance_marks() == []


def test_a_throughput_search_is_marked_per_try_and_at_its_measurement(host):
    from torchperf_tui.engine.measurements.throughput import find_max_batch

    cfg = BenchConfig(model=TINY, input_shape=(1, 3, 8, 8), device="cpu")
    host(BUSY, 1.0, "measurements.batch_runner", "measurements.throughput")
    result = find_max_batch(cfg, max_batch=2, try_iters=2, measure_iters=2, time_budget_s=None)
    points = [*result.tries, result.measurement]
    assert [t.label for t in points] == ["batch 1 (grow)", "batch 2 (grow)", f"the measurement at batch {result.best_batch}"]
    during = "its timed iterations"
    assert result.disturbance_marks() == [f"{t.label}: {busy_line(during)}" for t in points]
    data = result.to_dict()
    assert data["disturbance_marks"] == result.disturbance_marks()
    assert [t["disturbance_marks"] for t in data["tries"]] == [[busy_line(during)]] * 2
    assert data["measurement"]["host_noise"]["host_noisy"] is True
    host(0.0, QUIET_LOAD, "measurements.batch_runner", "measurements.throughput")
    quiet = find_max_batch(cfg, max_batch=2, try_iters=2, measure_iters=2, time_budget_s=None)
    assert quiet.disturbance_marks() == [] and not any(t.host_noise.noisy for t in quiet.tries)


def test_the_timing_modes_are_marked_per_mode(host):
    from torchperf_tui.engine.measurements.timing_modes import run_modes

    cfg = BenchConfig(model=TINY, input_shape=(1, 3, 8, 8), device="cpu", warmup=1, iters=4)
    host(BUSY, 1.0, "measurements.timing_modes")
    result = run_modes(cfg, ("sync", "pipelined"), per_block=2, rounds=2)
    assert [m.host_noise.windows for m in result.modes] == [2, 2]  # each mode's share of each round
    assert result.disturbance_marks() == [f"{mode}: {busy_line('its shares of the rounds')}"
                                          for mode in ("sync", "pipelined")]
    data = result.to_dict()
    assert data["disturbance_marks"] == result.disturbance_marks()
    assert [m["disturbance_marks"] for m in data["modes"]] == [[busy_line("its shares of the rounds")]] * 2
    host(0.0, QUIET_LOAD, "measurements.timing_modes")
    assert run_modes(cfg, ("sync", "pipelined"), per_block=2, rounds=2).disturbance_marks() == []


def test_a_sweep_is_marked_per_length(host):
    from torchperf_tui.engine.measurements.sweep import run_sweep

    cfg = BenchConfig(model="hf:llama", model_args=TINY_LLAMA, device="cpu", batch=1)
    host(BUSY, 1.0, "measurements.sweep")
    result = run_sweep(cfg, 8, 16, iters=2, warmup=0, time_budget_s=0)
    assert [p.label for p in result.points] == ["length 8", "length 16"]
    assert result.disturbance_marks() == [f"length {n}: {busy_line('its timed blocks')}" for n in (8, 16)]
    data = result.to_dict()
    assert data["disturbance_marks"] == result.disturbance_marks()
    assert data["points"][0]["host_noise"]["host_noisy"] is True
    host(0.0, QUIET_LOAD, "measurements.sweep")
    assert run_sweep(cfg, 8, 16, iters=2, warmup=0, time_budget_s=0).disturbance_marks() == []


def test_a_generation_is_not_called_noisy_under_a_high_load_alone(host):
    from torchperf_tui.engine.measurements.generation import run_generation

    cfg = BenchConfig(model="hf:llama", model_args=TINY_LLAMA, device="cpu", seq_len=8, time_budget_s=None)
    host(0.0, QUIET_LOAD, "measurements.generation")
    assert run_generation(cfg, 3, runs=1).disturbance_marks() == []
    host(BUSY, 1.0, "measurements.generation")
    assert run_generation(cfg, 3, runs=1).disturbance_marks() == [busy_line("the timed run")]


def test_a_generation_ab_is_marked_like_an_ab(host):
    from torchperf_tui.engine.measurements.ab_arms import parse_arm_spec
    from torchperf_tui.engine.measurements.generation_ab import run_generation_ab

    base = BenchConfig(model="hf:llama", model_args=TINY_LLAMA, device="cpu", seq_len=8)
    arms = parse_arm_spec(""), parse_arm_spec("threads=1")
    host(BUSY, 1.0, "measurements.generation_ab")
    result = run_generation_ab(base, *arms, 3, blocks=6)
    assert result.disturbance_marks() == [busy_line("the blocks")]
    assert result.a.host_noise.windows == 12 and result.host_noise.missing["spread"] == "said per arm"  # both arms
    data = result.to_dict()
    assert data["disturbance_marks"] == [busy_line("the blocks")] and data["b"]["host_noise"]["host_noisy"] is True
    host(0.0, QUIET_LOAD, "measurements.generation_ab")
    assert run_generation_ab(base, *arms, 3, blocks=6).disturbance_marks() == []


def test_the_kernels_ab_is_marked_per_arm(host):
    from torchperf_tui.engine.analysis.kernels import conv_kernels
    from torchperf_tui.engine.measurements.ab_arms import parse_arm_spec

    base = BenchConfig(model=TINY, input_shape=(1, 3, 8, 8), device="cpu")
    arms = parse_arm_spec(""), parse_arm_spec("threads=1")
    host(BUSY, 1.0, "analysis.kernels")
    result = conv_kernels(base, *arms, iters=1, warmup=0)
    assert result.disturbance_marks() == [f"arm {arm}: {busy_line('its profiled passes')}" for arm in "AB"]
    assert result.to_dict()["arm_hosts"]["B"]["host_noisy"] is True
    host(0.0, QUIET_LOAD, "analysis.kernels")
    assert conv_kernels(base, *arms, iters=1, warmup=0).disturbance_marks() == []
