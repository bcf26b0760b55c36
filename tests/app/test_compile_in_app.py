"""torch.compile in the app: a compiled run's lines say its cold and warm starts apart from the samples and what the
compile bought (the break-even against each), in one line at 80x24 beside the sidebar (two rows there, the histogram
keeping its room), and each start by phase on a taller terminal. The measurement process answers with a recorded compiled run (tests/app/recorded_answers.py)."""

from __future__ import annotations

import dataclasses

from textual.widgets import Select

from tests.app.helpers import choose_model, in_sight, make_app, screen_text, wait_ready, wait_until
from tests.app.recorded_answers import TimedRuns
from torchperf_tui.engine.measurements.compile_cost import CompileCost, CompilePhases

COLD = CompilePhases(wall_s=42.7, dynamo_s=2.4, aot_s=3.8, inductor_s=2.1, codegen_s=32.7, rest_s=1.7, frames=1,
                     fx_graph_misses=1, aot_misses=1)
WARM = CompilePhases(wall_s=5.3, dynamo_s=2.8, aot_s=2.2, inductor_s=0.0, codegen_s=0.0, rest_s=0.3, frames=1,
                     ready_s=19.5, fx_graph_hits=1, aot_hits=1)


class CompiledRuns(TimedRuns):
    """TimedRuns' answer, compiled in the mode asked, with its cold and warm starts and an eager run 4 ms slower."""

    def __call__(self, params: dict):
        recorded = super().__call__(params)
        result = recorded.result
        mode = params["cfg"].compile
        p50 = result.stats.p50_ms
        cost = CompileCost(compile_s=COLD.wall_s, frames=1, graphs=1, graph_breaks=0, recompiles=0,
                           eager_median_ms=p50 + 4.0, compiled_median_ms=p50, eager_iters=60,
                           eager_source="timed right after", break_even_calls=10_675, cold=COLD, warm=WARM,
                           break_even_warm_calls=1_325)
        return dataclasses.replace(recorded, result=dataclasses.replace(
            result, compile_mode=mode, compiled=True, compile_s=COLD.wall_s, compile_cost=cost))


async def compiled_run(app, pilot) -> str:
    await wait_ready(pilot)
    await choose_model(pilot, shape="3x32x32")
    app.main.query_one("#option-compile", Select).value = "default"  # as a user picks it: a compiled run starts
    await wait_until(pilot, lambda: app.session.runs.get(1) is not None and app.session.runs.get(1).finished,
                     what="the compiled run")
    await wait_until(pilot, lambda: "warm" in screen_text(app, "#run-stats"), what="the compile lines")
    return screen_text(app, "#run-stats")


async def test_at_80x24_a_compiled_run_says_its_cold_and_warm_starts_and_both_break_evens_in_one_line():
    app = make_app(answers={"time": CompiledRuns()})
    async with app.run_test(size=(80, 24)) as pilot:
        text = await compiled_run(app, pilot)
        assert app.session.runs.get(1).compile == "default"
        line = "compile default: cold 42.70 s · warm 5.30 s · break-even 10,675 calls cold, 1,325 warm"
        assert line in text.splitlines(), text
        stats = app.main.query_one("#run-stats")
        assert len(line) <= 2 * stats.size.width  # two rows beside the sidebar
        await wait_until(pilot, lambda: in_sight(app, stats), what="the run's lines in sight")


async def test_on_a_tall_terminal_each_start_is_said_by_phase():
    app = make_app(answers={"time": CompiledRuns()})
    async with app.run_test(size=(140, 50)) as pilot:
        text = " ".join((await compiled_run(app, pilot)).split())
        assert "torch.compile mode default: cold start 42.70 s · warm start 5.30 s (not in the samples)" in text
        assert ("cold start: 42.70 s, an empty cache, in this process: dynamo 2.40 s · AOT autograd 3.80 s · inductor "
                "2.10 s · code generation 32.70 s · the rest 1.70 s; FX graph cache 1 miss, AOT autograd cache 1 miss"
                in text)
        assert "warm start: 5.30 s, a second process, the cache filled: dynamo 2.80 s" in text
        assert "break-even after 10,675 calls from a cold start" in text and "1,325 from a warm one (5.30 s)" in text
