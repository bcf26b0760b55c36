"""The app measures in a process of its own: the UI never imports torch, and survives a model that kills the
process it runs in."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from tests.app.helpers import make_app, notifications, real_process, run_custom_model, wait_ready, wait_until


def test_the_ui_process_never_imports_torch_even_after_a_run(tmp_path):
    # In a fresh interpreter: pytest's own process has imported torch for other tests.
    script = textwrap.dedent("""
        import asyncio, sys
        from tests.app.helpers import flip, make_app, run_custom_model, wait_ready, wait_until

        async def main():
            # max_batch: the search's path whole (tries, the final measurement, its wording) without its plateau
            # at batch 256 and more, 8 s of the measurement process's CPU of this test's 26
            app = make_app(poll_telemetry=True, warmup=1, iters=5, model="tests.tinymodels:tiny_cnn",
                               autostart=True, max_batch=8)
            async with app.run_test(size=(100, 30)) as pilot:
                await wait_ready(pilot)
                await wait_until(pilot, lambda: app.session.runs.get(1) is not None and app.session.runs.get(1).finished,
                                 what="the run")
                await flip(pilot, "mkldnn_enabled")  # a flag off its default: a new run, flags described
                await wait_until(pilot, lambda: app.session.runs.get(2) is not None and app.session.runs.get(2).finished,
                                 what="the run after the flip")
                await pilot.press("a")  # A/B: both arms described, compared, saved
                await wait_until(pilot, lambda: app.session.runs.get(4) is not None and app.session.runs.get(4).finished,
                                 timeout=240, what="the A/B")
                await pilot.press("t")
                await wait_until(pilot, lambda: not app.session.measure.pending(), what="the search")
                for run in app.session.runs:  # every run kept, so a failure shows what became of each
                    print("run", run.run_id, "status", run.status, len(run.samples_ms))
                print("torch imported:", "torch" in sys.modules, "scipy imported:", "scipy" in sys.modules,
                      "timm or transformers imported:", "timm" in sys.modules or "transformers" in sys.modules)

        asyncio.run(main())
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                          env={**__import__("os").environ, "TORCHPERF_HISTORY": str(tmp_path / "h.jsonl")})
    assert proc.returncode == 0, proc.stderr[-2000:]
    # The autostart run kept its 5 samples (by id: a slow box may have cancelled and restarted a run).
    assert "status done 5" in proc.stdout, proc.stdout
    assert "torch imported: False scipy imported: False timm or transformers imported: False" in proc.stdout


@pytest.mark.own_process  # its process dies and another starts
async def test_a_model_that_kills_its_process_fails_its_run_and_the_next_run_works():
    app = make_app(warmup=1, iters=5)
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_ready(pilot)
        first_pid = app.session.measurement_pid
        await run_custom_model(pilot, "tests.hostilemodels:kills_its_process")
        await wait_until(pilot, lambda: app.session.runs.get(1) is not None and app.session.runs.get(1).status == "failed",
                         what="the run to fail")
        error = app.session.runs.get(1).error
        assert error.startswith("the measurement process was killed (SIGKILL) while timing "
                                "tests.hostilemodels:kills_its_process")
        assert "started a new one" in error
        assert any("was killed (SIGKILL)" in text for text in notifications(app))
        assert app.is_running
        await wait_until(pilot, lambda: app.session.measurement_pid not in (None, first_pid), what="a new process")
        await run_custom_model(pilot, "tests.tinymodels:tiny_cnn")
        await wait_until(pilot, lambda: app.session.runs.get(2) is not None and app.session.runs.get(2).status == "done",
                         what="the next run")


async def test_a_key_asks_the_measurement_process_and_the_pane_shows_its_answer():
    """The app's seam for its measurement process: `k` after a flip sends one kernels job with the flags before
    the flip (A) and after it (B); the (fake) process answers it with a recorded result, which the Kernels tab
    shows. The model catalogue, the analysis and the run after the flip go to the real process."""
    from textual.widgets import DataTable

    from tests.app.helpers import TINY, choose_model, flip, screen_text
    from tests.fakes.fake_measurement import FakeMeasurement
    from torchperf_tui.engine.analysis.kernels import CPU_NOTE, KernelComparison, LayerKernels
    from torchperf_tui.engine.analysis.kernel_time import KernelTime

    recorded = KernelComparison(
        model=TINY, device="cpu", input_shape=(1, 3, 32, 32), a_spec="defaults", b_spec="mkldnn off",
        layers=[LayerKernels("conv_recorded", [KernelTime("aten::mkldnn_convolution", 120.0, 1)],
                             [KernelTime("aten::thnn_conv2d", 310.0, 1)])],
        kind="cpu-op", note=CPU_NOTE, iters=3)
    fake = FakeMeasurement(answers={"kernels": recorded}, real=real_process())
    app = make_app(warmup=1, iters=5, measurement=fake)
    async with app.run_test(size=(110, 34)) as pilot:
        await wait_ready(pilot)
        await choose_model(pilot, TINY, "3x32x32")
        await flip(pilot, "mkldnn_enabled")
        await pilot.press("k")
        await wait_until(pilot, lambda: "B: mkldnn off" in screen_text(app, "#kernels-status"), what="its status line")
        table = app.pane("kernels").query_one(DataTable)
        assert table.row_count == 1 and "conv_recorded" in str(table.get_row_at(0)[0])
        (params,) = [params for kind, params in fake.requests if kind == "kernels"]
        assert params["a"].flags.mkldnn_enabled and not params["b"].flags.mkldnn_enabled  # A: before the flip, B: after
        assert {"catalogue", "analyse"} <= set(fake.kinds_asked())  # the rest went to the real process
