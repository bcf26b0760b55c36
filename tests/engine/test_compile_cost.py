"""torch.compile's cost (engine/measurements/compile_cost.py): the break-even arithmetic (a pure function, no torch),
dynamo's counters read from a real small compile, the eager run beside it, recompiles under a varying schedule
kept out of the statistics, and their words. The compiling tests skip where there is no C++ compiler (inductor
needs one on the CPU); the fallback without one is test_timing.py's."""

import shutil
import subprocess
import sys

import pytest

from torchperf_tui.engine.measurements.compile_cost import CompileCost, break_even_calls

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
    assert rows["break-even"] == ("after 10,000 calls (compile 10.0 s / (eager 2.00 ms - compiled 1.00 ms per "
                                  "call))", "")
    line = compile_line_rows("default", result)[1]
    assert line[0] == "compile cost" and line[1].startswith("1 graph break · 0 recompiles after the first call · "
                                                             "break-even after 10,000 calls")
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
    result = run_benchmark(cfg)
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


@needs_compiler
def test_a_varying_schedule_under_compile_counts_its_recompiles_and_keeps_them_out_of_the_statistics():
    from torchperf_tui.engine.measurements.bench_config import BenchConfig
    from torchperf_tui.engine.measurements.timing import run_benchmark

    cfg = BenchConfig(model="tests.tinymodels:tiny_cnn", input_shape=(1, 3, 16, 16), device="cpu", warmup=1,
                      iters=6, shapes="cycle:3:8-24", compile="default")
    result = run_benchmark(cfg)
    assert result.compiled, result.compile_error
    cost = result.compile_cost
    assert cost.recompiles >= 1 and 1 <= cost.recompiled_samples <= cost.recompiles
    assert result.stats.n == len(result.samples_ms) - cost.recompiled_samples
    assert cost.eager_median_ms is None and cost.break_even_note.startswith("shapes vary (cycle:3:8-24)")
