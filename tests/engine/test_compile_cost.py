"""torch.compile's cost (engine/measurements/compile_cost.py): the break-even arithmetic and the phases of a first call
from torch's nested timers (pure functions, no torch), dynamo's counters read from a real small compile, the eager run
beside it, recompiles under a varying schedule kept out of the statistics, the cold start in an empty cache and the
warm start in a second process from it (warm_compile.py: once for real, else a stand-in), and their words. The
compiling tests skip where there is no C++ compiler (inductor needs one on the CPU); the fallback without one is
test_timing.py's."""

import shutil
import subprocess
import sys

import pytest

from types import SimpleNamespace

from torchperf_tui.engine.measurements.compile_cost import CompileCost, CompilePhases, break_even_calls, phases_of

COMPILER = next((shutil.which(name) for name in ("c++", "g++", "clang++") if shutil.which(name)), None)
needs_compiler = pytest.mark.skipif(COMPILER is None, reason="torch.compile on the CPU needs a C++ compiler; none here")


def test_break_even_is_compile_time_over_the_time_saved_per_call():
    assert break_even_calls(10.0, 2.0, 1.0) == 10_000  # 10 s / 1 ms saved per call
    assert break_even_calls(0.0015, 1.0, 0.0) == 2  # 1.5 calls: paid back at the second
    assert break_even_calls(1.0, 1.0, 1.0) is None  # not faster: never
    assert break_even_calls(1.0, 1.0, 1.5) is None  # slower: never
    assert break_even_calls(0.0, 2.0, 1.0) == 1


def test_the_break_even_module_needs_no_torch():
    code = ("import sys; from torchperf_tui.engine.measurements.compile_cost import break_even_calls; "
            "assert break_even_calls(1.0, 3.0, 1.0) == 500; assert 'torch' not in sys.modules, 'torch imported'")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_the_words_of_a_compile_cost():
    from types import SimpleNamespace

    from torchperf_tui.wording import WARNING
    from torchperf_tui.wording.timing import break_even_text, compile_line_rows, compile_rows

    cost = CompileCost(compile_s=10.0, frames=2, graphs=2, graph_breaks=1, break_reasons=["a print"], recompiles=0,
                       eager_median_ms=2.0, compiled_median_ms=1.0, eager_iters=64, eager_source="timed right after",
                       break_even_calls=10_000)
    result = SimpleNamespace(compile_mode="default", compiled=True, compile_s=10.0, compile_error=None,
                             compile_cost=cost)
    rows = {label: (value, level) for label, value, level in compile_rows(result)}
    assert rows["graph breaks"] == ("1 graph break (a print)", WARNING)
    assert rows["recompiles"] == ("0 recompiles after the first call", "")
    assert rows["eager run"][0] == "p50 2.00 ms (timed right after)"
    assert rows["break-even"] == ("after 10,000 calls from a cold start (compile 10.00 s / (eager 2.00 ms - compiled "
                                  "1.00 ms per call))", "")
    line = compile_line_rows("default", result)[1]
    assert line[0] == "compile cost" and line[1].startswith("1 graph break · 0 recompiles after the first call · "
                                                             "break-even after 10,000 calls")
    assert [label for label, _, _ in compile_rows(result)][0] == "torch.compile"  # a result without the starts
    never = CompileCost(compile_s=1.0, eager_median_ms=1.0, compiled_median_ms=1.2,
                        break_even_note="never: the compiled model is not faster than eager")
    assert break_even_text(never) == ("never: the compiled model is not faster than eager (compiled 1.20 ms, eager "
                                      "1.00 ms per call)")
    unknown = CompileCost(compile_s=1.0, break_even_note="shapes vary (cycle:2): no eager run on one input")
    assert break_even_text(unknown) == "not known: shapes vary (cycle:2): no eager run on one input"


@needs_compiler
def test_a_compiled_run_counts_its_graph_break_and_times_eager_beside_it():
    from torchperf_tui.engine.measurements.bench_config import BenchConfig
    from torchperf_tui.engine.measurements.timing import run_benchmark

    cfg = BenchConfig(model="tests.compile_models:breaking_net", input_shape=(2, 8), device="cpu", warmup=1,
                      iters=5, compile="default")
    result = run_benchmark(cfg, warm_start=None)
    assert result.compiled, result.compile_error
    cost = result.compile_cost
    assert cost.graph_breaks == 1 and len(cost.break_reasons) == 1 and "\n" not in cost.break_reasons[0]
    assert cost.frames == 2  # the forward, and the frame it resumes in after the break
    assert cost.recompiles == 0 and cost.recompiled_samples == 0
    assert cost.eager_iters == 5 and cost.eager_median_ms > 0
    assert cost.compiled_median_ms == result.stats.p50_ms and cost.compile_s == result.compile_s
    assert cost.break_even_calls == break_even_calls(cost.compile_s, cost.eager_median_ms, cost.compiled_median_ms)
    assert (cost.break_even_calls is None) == (cost.break_even_note != "")
    assert result.to_dict()["compile_cost"]["graph_breaks"] == 1
    assert cost.cold.frames == 2 and cost.cold.fx_graph_misses == 2  # each frame's graph, compiled anew
    assert cost.warm is None and cost.warm_note == "not measured (asked not to)"


@needs_compiler
def test_a_varying_schedule_under_compile_counts_its_recompiles_and_keeps_them_out_of_the_statistics():
    from torchperf_tui.engine.measurements.bench_config import BenchConfig
    from torchperf_tui.engine.measurements.timing import run_benchmark

    cfg = BenchConfig(model="tests.tinymodels:tiny_cnn", input_shape=(1, 3, 16, 16), device="cpu", warmup=1,
                      iters=6, shapes="cycle:3:8-24", compile="default")
    result = run_benchmark(cfg, warm_start=None)
    assert result.compiled, result.compile_error
    cost = result.compile_cost
    assert cost.recompiles >= 1 and 1 <= cost.recompiled_samples <= cost.recompiles
    assert result.stats.n == len(result.samples_ms) - cost.recompiled_samples
    assert cost.eager_median_ms is None and cost.break_even_note.startswith("shapes vary (cycle:3:8-24)")


def test_the_phases_are_each_nested_timer_less_the_one_inside_it_summed_over_the_frames():
    cold = [SimpleNamespace(dynamo_cumulative_compile_time_us=9_000_000, aot_autograd_cumulative_compile_time_us=8_000_000,
                            inductor_cumulative_compile_time_us=7_000_000,
                            inductor_code_gen_cumulative_compile_time_us=6_500_000, compile_time_autotune_time_us=2_000_000,
                            inductor_fx_local_cache_miss_count=1, aotautograd_local_cache_miss_count=1),
            SimpleNamespace(dynamo_cumulative_compile_time_us=500_000)]  # a frame with no graph (a break)
    phases = phases_of(cold, wall_s=10.0)
    assert (phases.dynamo_s, phases.aot_s, phases.inductor_s, phases.codegen_s) == pytest.approx((1.5, 1.0, 0.5, 6.5))
    assert phases.rest_s == pytest.approx(0.5) and phases.autotune_s == pytest.approx(2.0)  # within, not added
    assert (phases.frames, phases.fx_graph_misses, phases.aot_misses, phases.fx_graph_hits) == (2, 1, 1, None)
    # A warm start: AOT autograd's cache hit loads inductor's code, whose timers then do not run.
    warm = phases_of([SimpleNamespace(dynamo_cumulative_compile_time_us=2_000_000, aot_autograd_cumulative_compile_time_us=
                                      1_500_000, inductor_cumulative_compile_time_us=None,
                                      inductor_fx_local_cache_hit_count=1, aotautograd_local_cache_hit_count=1)], 2.5)
    assert (warm.dynamo_s, warm.aot_s, warm.inductor_s, warm.codegen_s) == pytest.approx((0.5, 1.5, 0.0, 0.0))
    assert warm.misses == 0 and warm.aot_hits == 1
    # Torch before 2.6: the same timers in seconds.
    older = phases_of([SimpleNamespace(entire_frame_compile_time_s=4.0, backend_compile_time_s=3.0,
                                       inductor_compile_time_s=2.0, code_gen_time_s=1.0)], 4.0)
    assert (older.dynamo_s, older.aot_s, older.inductor_s, older.codegen_s, older.rest_s) == (1.0, 1.0, 1.0, 1.0, 0.0)
    none = phases_of([], 3.0)
    assert none.dynamo_s is None and none.wall_s == 3.0 and none.note == "this torch records no compile timers"
    assert CompilePhases.from_dict({**vars(warm), "unknown": 1}) == warm


def test_the_words_of_the_cold_and_warm_starts():
    from torchperf_tui.wording import WARNING
    from torchperf_tui.wording.timing import break_even_text, compile_line_rows, compile_rows

    cold = CompilePhases(wall_s=4.2, dynamo_s=0.4, aot_s=0.2, inductor_s=0.2, codegen_s=3.3, rest_s=0.1, frames=1,
                         fx_graph_misses=1, aot_misses=1)
    warm = CompilePhases(wall_s=0.6, dynamo_s=0.45, aot_s=0.05, inductor_s=0.0, codegen_s=0.0, rest_s=0.1, frames=1,
                         ready_s=20.0, fx_graph_hits=1, aot_hits=1)
    cost = CompileCost(compile_s=4.2, graph_breaks=0, recompiles=0, eager_median_ms=2.0, compiled_median_ms=1.0,
                       eager_source="timed right after", break_even_calls=4200, cold=cold, warm=warm,
                       break_even_warm_calls=600)
    result = SimpleNamespace(compile_mode="default", compiled=True, compile_s=4.2, compile_error=None, compile_cost=cost)
    rows = {label: (value, level) for label, value, level in compile_rows(result)}
    assert rows["torch.compile"] == ("mode default, cold start 4.20 s · warm start 600 ms (not in the samples)", "")
    assert rows["cold start"] == ("4.20 s, an empty cache, in this process: dynamo 400 ms · AOT autograd 200 ms · "
                                  "inductor 200 ms · code generation 3.30 s · the rest 100 ms; FX graph cache 1 miss, "
                                  "AOT autograd cache 1 miss", "")
    assert rows["warm start"][0].startswith("600 ms, a second process, the cache filled: dynamo 450 ms · AOT autograd "
                                            "50.00 ms · inductor 0 · code generation 0 · the rest 100 ms; FX graph "
                                            "cache 1 hit, AOT autograd cache 1 hit; that process first readied torch's "
                                            "compiler (20.00 s")
    assert rows["break-even"][0] == ("after 4,200 calls from a cold start (compile 4.20 s / (eager 2.00 ms - compiled "
                                     "1.00 ms per call)), 600 from a warm one (600 ms)")
    compact = compile_line_rows("default", result, compact=True)  # a short terminal: one line, breaks where some
    assert compact == [("compile default", "cold 4.20 s · warm 600 ms · break-even 4,200 calls cold, 600 warm",
                        "")]
    broken = CompileCost(**{**vars(cost), "graph_breaks": 2, "recompiles": 1})
    assert compile_line_rows("default", SimpleNamespace(**{**vars(result), "compile_cost": broken}), compact=True) == [
        ("compile default", "cold 4.20 s · warm 600 ms · break-even 4,200 calls cold, 600 warm · 2 graph breaks "
         "· 1 recompile", WARNING)]
    assert [label for label, _, _ in compile_line_rows("default", result)][:3] == [
        "torch.compile mode default", "cold start", "warm start"]
    # A warm start that missed the cache compiled again: a warning; one skipped says why, as a warning too.
    missed = CompileCost(compile_s=4.2, cold=cold, warm=CompilePhases(wall_s=4.0, dynamo_s=0.4, fx_graph_misses=1))
    assert {label: level for label, _, level in compile_rows(SimpleNamespace(**{**vars(result),
                                                                             "compile_cost": missed}))}[
        "warm start"] == WARNING
    skipped = CompileCost(compile_s=4.2, cold=cold, warm_note="skipped: the second process took over 188 s")
    rows = {label: (value, level) for label, value, level in
            compile_rows(SimpleNamespace(**{**vars(result), "compile_cost": skipped}))}
    assert rows["warm start"] == ("skipped: the second process took over 188 s", WARNING)
    assert rows["torch.compile"][0] == "mode default, cold start 4.20 s · warm start – (not in the samples)"
    assert break_even_text(CompileCost(compile_s=4.2, eager_median_ms=2.0, compiled_median_ms=1.0,
                                       break_even_calls=4200)).endswith("per call))")  # no warm start: cold alone


@needs_compiler
def test_a_compiled_run_starts_cold_in_an_empty_cache_and_hands_its_warm_start_the_filled_one():
    """Twice in one process, each run misses both caches (its cold start is cold), and the warm start (a stand-in
    here) is asked for the run's cache folder, spec and thread count; its figures give the second break-even."""
    import os

    from torchperf_tui.engine.measurements.bench_config import BenchConfig
    from torchperf_tui.engine.measurements.compile_cache import CACHE_ENV
    from torchperf_tui.engine.measurements.timing import run_benchmark

    asked = []

    def stand_in(request, should_cancel):
        asked.append((request, sorted(os.listdir(request.cache_environ[CACHE_ENV])), should_cancel()))
        return CompilePhases(wall_s=0.001, dynamo_s=0.001, aot_s=0.0, inductor_s=0.0, codegen_s=0.0), ""

    before = os.environ.get(CACHE_ENV)
    cfg = BenchConfig(model="tests.tinymodels:tiny_cnn", input_shape=(1, 3, 8, 8), device="cpu", warmup=1, iters=3,
                      compile="default")
    costs = [run_benchmark(cfg, warm_start=stand_in).compile_cost for _ in range(2)]
    assert all(cost.cold.fx_graph_misses == 1 and cost.cold.aot_misses == 1 for cost in costs)
    assert all(cost.cold.codegen_s > 0 and cost.cold.dynamo_s > 0 for cost in costs)
    (first, files, cancelled), (second, _, _) = asked
    assert first.cfg == cfg and first.threads >= 1 and not cancelled and "fxgraph" in files
    assert first.cache_environ[CACHE_ENV] != second.cache_environ[CACHE_ENV]  # a folder of its own each
    assert not os.path.exists(first.folder) and os.environ.get(CACHE_ENV) == before  # removed, put back
    cost = costs[-1]
    assert cost.warm.wall_s == 0.001 and cost.warm_note == ""
    assert cost.break_even_warm_calls == break_even_calls(0.001, cost.eager_median_ms, cost.compiled_median_ms)


@needs_compiler
def test_the_warm_start_compiles_in_a_second_process_from_the_filled_cache_and_hits_it():
    """The one real second process: it finds the cold start's graphs in the cache (no code generation), and says
    how long its process took to ready torch's compiler before the clock."""
    from torchperf_tui.engine.measurements.bench_config import BenchConfig
    from torchperf_tui.engine.measurements.timing import run_benchmark

    cfg = BenchConfig(model="tests.tinymodels:tiny_cnn", input_shape=(1, 3, 8, 8), device="cpu", warmup=1, iters=3,
                      compile="default")
    cost = run_benchmark(cfg).compile_cost
    assert cost.warm is not None, cost.warm_note
    assert cost.warm.fx_graph_hits == 1 and cost.warm.aot_hits == 1 and cost.warm.misses == 0
    assert cost.warm.codegen_s == 0 and cost.warm.ready_s > 0 and cost.warm.wall_s > 0
    assert cost.to_dict()["warm"]["aot_hits"] == 1


def test_a_warm_start_past_its_limit_or_cancelled_is_stopped_and_says_so(tmp_path):
    from torchperf_tui.engine.measurements.bench_config import BenchConfig
    from torchperf_tui.engine.measurements.warm_compile import STOPPED, WarmRequest, compile_warm

    cfg = BenchConfig(model="tests.tinymodels:tiny_cnn", input_shape=(1, 3, 8, 8), device="cpu", compile="default")
    request = WarmRequest(cfg=cfg, cache_environ={}, folder=str(tmp_path), threads=1, limit_s=0.0)
    phases, note = compile_warm(request, lambda: False)
    assert phases is None and note.startswith("skipped: the second process took over 0 s")
    request = WarmRequest(cfg=cfg, cache_environ={}, folder=str(tmp_path), threads=1, limit_s=600.0)
    assert compile_warm(request, lambda: True) == (None, STOPPED)


def test_a_warm_start_that_fails_in_its_process_says_its_line(tmp_path):
    from torchperf_tui.engine.measurements.bench_config import BenchConfig
    from torchperf_tui.engine.measurements.warm_compile import WarmRequest, compile_warm

    cfg = BenchConfig(model="tests.no_such_module:net", input_shape=(1, 3, 8, 8), device="cpu", compile="default")
    phases, note = compile_warm(WarmRequest(cfg=cfg, cache_environ={}, folder=str(tmp_path), threads=1,
                                            limit_s=600.0), lambda: False)
    assert phases is None and note.startswith("failed in the second process: ") and "no_such_module" in note
