import pytest
import torch

from torchperf_tui.core.errors import OutOfMemory, ShapeError
from torchperf_tui.engine.measurements.flags import Flags
from torchperf_tui.engine.measurements.bench_config import BenchConfig
from torchperf_tui.engine.measurements.timing import run_benchmark, run_timed_loop

TINY = "tests.tinymodels:tiny_cnn"


def test_loop_streams_first_warmup_then_timed_samples_in_order():
    events = []
    times = run_timed_loop(lambda: None, warmup=3, iters=5,
                           on_sample=lambda phase, i, n, ms: events.append((phase, i, n)))
    assert events[0] == ("first", 0, 1)
    assert events[1:4] == [("warmup", i, 3) for i in range(3)]
    assert events[4:] == [("timed", i, 5) for i in range(5)]
    assert times.first_iter_ms is not None and len(times.warmup_ms) == 3 and len(times.samples_ms) == 5
    assert not times.cancelled


def test_loop_cancels_between_iterations_and_keeps_what_it_has():
    calls = []
    times = run_timed_loop(lambda: calls.append(1), warmup=2, iters=100,
                           should_cancel=lambda: len(calls) >= 6)
    # cancelled after 6 forward passes: first + 2 warm-up + 3 timed; no extra pass after the cancel
    assert times.cancelled
    assert len(times.samples_ms) == 3
    assert len(calls) == 6


def test_auto_warmup_stops_when_latency_is_stable():
    times = run_timed_loop(lambda: sum(range(200)), warmup="auto", iters=2)
    assert 10 <= len(times.warmup_ms) <= 200


def test_benchmark_runs_a_model_under_its_flags_and_restores_them():
    before = Flags.current()
    flags = Flags(num_threads=1, mkldnn_enabled=False)
    threads_inside = []
    cfg = BenchConfig(model=TINY, input_shape=(2, 3, 16, 16), device="cpu", warmup=2, iters=7, flags=flags)
    result = run_benchmark(cfg, on_sample=lambda *a: threads_inside.append(torch.get_num_threads()))
    assert Flags.current() == before
    assert set(threads_inside) == {1}
    assert result.flags == flags
    assert len(result.samples_ms) == 7 and len(result.warmup_ms) == 2
    assert result.stats.n == 7 and result.stats.p50_ms > 0
    assert result.stats.first_iter_ms == result.first_iter_ms > 0  # kept apart from the samples, in the stats
    assert result.input_shape == (2, 3, 16, 16) and result.batch == 2
    assert result.timer == "perf_counter" and result.device == "cpu"
    assert result.to_dict()["flags"]["num_threads"] == 1


def test_batch_overrides_the_first_dimension_and_dtypes_run():
    cfg = BenchConfig(model=TINY, input_shape=(1, 3, 8, 8), batch=3, device="cpu", warmup=0, iters=2,
                      dtype="bfloat16", channels_last=True)
    result = run_benchmark(cfg)
    assert result.input_shape == (3, 3, 8, 8)
    assert result.dtype == "bfloat16" and result.channels_last


def test_rejected_shape_is_a_one_line_shape_error():
    cfg = BenchConfig(model=TINY, input_shape=(1, 5, 8, 8), device="cpu", warmup=0, iters=1)
    with pytest.raises(ShapeError) as info:
        run_benchmark(cfg)
    assert "rejected input 1x5x8x8" in str(info.value) and "\n" not in str(info.value)


def test_out_of_memory_is_reported_not_raised_raw():
    cfg = BenchConfig(model="tests.tinymodels:oom_model", input_shape=(1, 3, 8, 8), device="cpu",
                      warmup=0, iters=1)
    with pytest.raises(OutOfMemory, match="out of memory"):
        run_benchmark(cfg)


def test_cancelled_benchmark_says_so():
    seen = []
    cfg = BenchConfig(model=TINY, input_shape=(1, 3, 8, 8), device="cpu", warmup=0, iters=1000)
    result = run_benchmark(cfg, on_sample=lambda *a: seen.append(a), should_cancel=lambda: len(seen) >= 4)
    assert result.cancelled and len(result.samples_ms) == 3


@pytest.mark.gpu
def test_cuda_benchmark_uses_events_and_restores_flags():
    before = Flags.current()
    cfg = BenchConfig(model=TINY, input_shape=(4, 3, 32, 32), device="cuda", warmup=3, iters=10,
                      flags=Flags(cudnn_benchmark=True))
    result = run_benchmark(cfg)
    assert result.timer == "cuda-events" and result.device.startswith("cuda")
    assert result.stats.n == 10 and result.stats.p50_ms > 0
    assert Flags.current() == before


def test_compiled_run_reports_compile_time_apart_from_samples():
    cfg = BenchConfig(model=TINY, input_shape=(1, 3, 8, 8), device="cpu", warmup=1, iters=3, compile="default")
    result = run_benchmark(cfg, warm_start=None)  # the warm start's second process: test_compile_cost.py
    assert result.compiled and result.compile_error is None
    assert result.compile_s > 0 and len(result.samples_ms) == 3
    assert result.compile_cost.cold.wall_s == result.compile_s
    assert result.to_dict()["compile_mode"] == "default"


def test_failing_compile_falls_back_to_eager_and_says_why(monkeypatch):
    def broken_compile(model, **kwargs):
        def run(x):
            raise RuntimeError("no working C++ compiler found\nmore detail")
        return run

    monkeypatch.setattr(torch, "compile", broken_compile)
    cfg = BenchConfig(model=TINY, input_shape=(1, 3, 8, 8), device="cpu", warmup=0, iters=2, compile="default")
    result = run_benchmark(cfg)
    assert not result.compiled and result.compile_s is None
    assert "no working C++ compiler found" in result.compile_error and "\n" not in result.compile_error
    assert len(result.samples_ms) == 2  # the eager numbers are there


def test_a_cycle_schedule_marks_first_seen_samples_and_reports_the_tuning_cost():
    from torchperf_tui.engine.measurements.bench_config import BenchConfig
    from torchperf_tui.engine.measurements.timing import run_benchmark

    told = []
    cfg = BenchConfig(model="tests.tinymodels:tiny_cnn", input_shape=(1, 3, 16, 16), device="cpu", warmup=2,
                      iters=8, shapes="cycle:3:8-24")
    result = run_benchmark(cfg, on_shape=lambda i, shape, first: told.append((i, shape, first)))
    sizes = [shape[-1] for shape in result.sample_shapes]
    assert sizes == [8, 16, 24, 8, 16, 24, 8, 16]
    # 16 is the configured size: the first iteration and the warm-up met it already
    assert result.sample_first_seen == [True, False, True, False, False, False, False, False]
    assert told == [(i, s, f) for i, (s, f) in enumerate(zip(result.sample_shapes, result.sample_first_seen))]
    report = result.shape_report
    assert report.distinct == 3 and report.first_seen == 2 and report.unrepeated == 0
    timed_first = [c for c in report.per_shape if c.first_timed]
    assert sorted(c.shape[-1] for c in timed_first) == [8, 24]
    assert report.tuning_cost_ms == pytest.approx(sum(c.first_ms - c.repeat_median_ms for c in timed_first))
    assert result.repeat_stats.n == 6 and result.stats.n == 8
    data = result.to_dict()
    assert data["shapes"] == "cycle:3:8-24" and data["sample_shapes"][0] == [1, 3, 8, 8]


def test_a_schedule_the_model_rejects_fails_before_the_run():
    from torchperf_tui.core.errors import ShapeError
    from torchperf_tui.engine.measurements.bench_config import BenchConfig
    from torchperf_tui.engine.measurements.timing import run_benchmark

    samples = []
    cfg = BenchConfig(model="tests.tinymodels:fixed_size", input_shape=(1, 3, 16, 16), device="cpu",
                      iters=4, shapes="random:12-16")
    with pytest.raises(ShapeError, match="shape schedule random:12-16: .* rejects input 1x3x12x12"):
        run_benchmark(cfg, on_sample=lambda *a: samples.append(a))
    assert samples == []


def test_items_per_second_counts_every_items_when_the_batch_varies():
    from torchperf_tui.engine.measurements.bench_config import BenchConfig
    from torchperf_tui.engine.measurements.timing import run_benchmark

    result = run_benchmark(BenchConfig(model="tests.tinymodels:tiny_cnn", input_shape=(2, 3, 8, 8), device="cpu",
                                       warmup=1, iters=6, shapes="random:8-12:batch=1-4"))
    items = sum(shape[0] for shape in result.sample_shapes)
    assert result.stats.fps == pytest.approx(items * 1000.0 / sum(result.samples_ms))


def test_memory_is_sampled_between_iterations():
    from torchperf_tui.engine.measurements.bench_config import BenchConfig
    from torchperf_tui.engine.measurements.timing import run_benchmark

    told = []
    result = run_benchmark(BenchConfig(model="tests.tinymodels:tiny_cnn", input_shape=(1, 3, 8, 8), device="cpu",
                                       warmup=2, iters=3), on_memory=lambda point, kind: told.append((point, kind)))
    assert result.memory_kind == "rss" and len(result.memory_trace) == 1 + 2 + 3 + 1
    assert told == [(point, "rss") for point in result.memory_trace]  # streamed as taken, with their kind
    times = [t for t, _, _ in result.memory_trace]
    assert times == sorted(times) and all(alloc > 0 for _, alloc, _ in result.memory_trace)


def test_a_failure_at_a_scheduled_shape_names_that_shape():
    from torchperf_tui.core.errors import ShapeError
    from torchperf_tui.engine.measurements.bench_config import BenchConfig
    from torchperf_tui.engine.measurements.timing import run_benchmark

    cfg = BenchConfig(model="tests.tinymodels:picky", input_shape=(1, 3, 16, 16), device="cpu", warmup=1,
                      iters=4, shapes="cycle:3:8-24")
    with pytest.raises(ShapeError, match="rejected input 1x3x24x24"):
        run_benchmark(cfg)
