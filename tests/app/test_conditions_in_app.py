"""The panes say a busy host under every measurement as the run's lines do: a throughput search per try (its table's
'yes !', cut as 'yes · noisy ho' at 80 columns before; the summary's '! disturbed: ...') and the timing modes per mode, from recorded results whose host
was busy (tests/fakes/fake_measurement.py); and a factory's example_inputs are listed in the model's line, with no
'assumed' note and no shape in the shape field."""

from __future__ import annotations

from tests.app.helpers import TINY, analysed, make_app, paste, row_cells, screen_text, wait_ready, wait_until
from tests.engine.test_measured_conditions import BUSY, QUIET_LOAD, ScriptedHost
from tests.fakes.fake_measurement import Recorded
from torchperf_tui.engine.hardware.host_noise import HostProbe

HOST = "noisy host: load 1.0 on 2 cores, other processes busy on 1.5 of them"


def noise(other: float, load: float, samples: list[float], during: str):
    probe = HostProbe(ScriptedHost(other, load), during=during)
    probe.begin()
    probe.end()
    return probe.summary(samples)


def recorded_search(params: dict) -> Recorded:
    """A search of batches 1 and 2 and the measurement at 2: batch 1's host quiet under a high load average, batch 2's
    and the measurement's busy."""
    from torchperf_tui.engine.measurements.batch_search import BatchTry, StopRule
    from torchperf_tui.engine.measurements.throughput import ThroughputResult
    from torchperf_tui.engine.hardware.nvml import NA

    during = "its timed iterations"
    tries = [BatchTry(1, True, "grow", 2.0, 500.0, iters=3, seconds=0.1,
                      host_noise=noise(0.0, QUIET_LOAD, [2.0] * 3, during)),
             BatchTry(2, True, "grow", 3.0, 666.7, iters=3, seconds=0.1, host_noise=noise(BUSY, 1.0, [3.0] * 3, during))]
    measured = BatchTry(2, True, "measure", 3.1, 645.2, iters=10, seconds=0.3,
                        host_noise=noise(BUSY, 1.0, [3.1] * 10, during))
    cfg = params["cfg"]
    result = ThroughputResult(
        model=cfg.model, device="cpu", sample_shape=(3, 32, 32), dtype="float32", channels_last=False, max_batch=2,
        max_batch_bound=2, hit_bound=True, tries=tries, measurement=measured, samples_per_s=645.2, latency_ms=3.1,
        memory_cap_bytes=2**30, allocator_before_bytes=NA("cpu"), allocator_after_bytes=NA("cpu"), cancelled=False,
        duration_s=1.0, best_batch=2, best_try_samples_per_s=666.7, stop_rule=StopRule.MAX_BATCH,
        stop_reason="stopped growing at the max-batch bound 2", limit_found=False, first_failure=None,
        time_budget_s=120.0, to_oom=False, host_noise=noise(BUSY, 1.0, [], "the batch search"))
    return Recorded(result, progress=tuple(("batch_try", t) for t in [*tries, measured]))


def recorded_modes(params: dict) -> Recorded:
    """sync's host busy, pipelined's quiet under a high load average."""
    from torchperf_tui.core.stats import compute_stats
    from torchperf_tui.engine.measurements.timing_modes import ModeResult, ModesResult

    cfg = params["cfg"]
    during = "its shares of the rounds"
    modes = []
    for name, other, load in (("sync", BUSY, 1.0), ("pipelined", 0.0, QUIET_LOAD)):
        samples = [2.0 + 0.01 * i for i in range(30)]
        modes.append(ModeResult(name, samples, compute_stats(samples), host_noise=noise(other, load, samples, during)))
    result = ModesResult(model=cfg.model, device="cpu", input_shape=tuple(cfg.input_shape), dtype="float32",
                         step="infer", flags=cfg.flags.resolved(), modes=modes, per_block=10, rounds=3)
    return Recorded(result)


async def test_the_throughput_pane_marks_each_busy_try_and_says_the_marks_under_the_search(tiny_app):
    async with tiny_app(size=(120, 40), answers={"throughput": recorded_search}) as pilot:
        app = pilot.app
        await pilot.press("t")
        await wait_until(pilot, lambda: "largest batch" in screen_text(app, "#throughput-summary"),
                         what="the search's summary")
        table = app.main.query_one("#throughput-table")
        assert [row_cells(table, i)["fits"] for i in range(table.row_count)] == [
            "yes", "yes !", "yes !"]  # batch 1 was quiet under a load of 8.4
        summary = " ".join(screen_text(app, "#throughput-summary").split())
        assert "! disturbed: batch 2 (grow): noisy host, the measurement at batch 2: noisy host" in summary
        assert "batch 1" not in summary.split("disturbed:")[1]


async def test_the_timing_modes_line_marks_the_mode_whose_host_was_busy(tiny_app):
    async with tiny_app(size=(120, 40), answers={"modes": recorded_modes}) as pilot:
        app = pilot.app
        await pilot.press("M")
        await wait_until(pilot, lambda: app.pane("timing").last_modes is not None, what="the timing modes")
        text = " ".join(screen_text(app, "#run-modes").split())
        assert "sync p50 2.15 ms (noisy host) · pipelined p50 2.15 ms (blocks of 10) disturbed:" in text
        # the app's own mark ('the app was busy during the run') comes first where its process was busy beside it
        assert f"sync: {HOST} during its shares of the rounds" in text.partition("disturbed:")[2]
        assert "pipelined: noisy" not in text
        assert f"sync: {HOST}" in app.main.query_one("#run-modes").tooltip


async def test_a_factorys_example_inputs_are_listed_with_no_assumed_shape():
    app = make_app(device="cpu")
    async with app.run_test(size=(160, 34)) as pilot:
        await wait_ready(pilot)
        spec = "tests.tinymodels:keyword_inputs"
        await pilot.click("#custom-model")
        await paste(pilot, spec, "enter")
        await wait_until(pilot, lambda: analysed(app, spec), timeout=120, what="the analysis of keyword_inputs")
        line = " ".join(screen_text(app, "#model-summary").split())
        assert "example_inputs at batch 1: input_ids 1x12 int64, attention_mask 1x12 int64" in line
        assert "input 1 " not in line and "3x224x224" not in line
        assert not app.main.query_one("#input-note").display  # nothing assumed
        shape = app.main.query_one("#shape")
        assert shape.value == "" and shape.placeholder == "example_inputs"
        # a model that declares no input and makes none is still said to be assumed
        await pilot.click("#custom-model")
        app.main.query_one("#custom-model").value = ""
        await paste(pilot, TINY, "enter")
        await wait_until(pilot, lambda: "input 3x224x224 assumed" in screen_text(app, "#input-note"), timeout=120,
                         what="the note that tiny_cnn's input shape is assumed")


async def test_what_the_app_saw_beside_a_search_marks_it_as_it_marks_a_run(tiny_app):
    seen = {}

    def resized_during(params: dict) -> Recorded:  # the window resized while the search ran
        seen["app"].session.disturbances.note("window resized")
        return recorded_search(params)

    async with tiny_app(size=(120, 40), answers={"throughput": resized_during}) as pilot:
        app = seen["app"] = pilot.app
        await pilot.press("t")
        await wait_until(pilot, lambda: "largest batch" in screen_text(app, "#throughput-summary"),
                         what="the search's summary")
        summary = " ".join(screen_text(app, "#throughput-summary").split())
        assert "disturbed: window resized during the run, batch 2 (grow): noisy host" in summary
