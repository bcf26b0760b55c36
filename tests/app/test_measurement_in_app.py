"""The app measures in a process of its own: the UI never imports torch, and survives a model that kills the
process it runs in."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from tests.app.helpers import notifications, run_custom_model, wait_ready, wait_until
from torchperf_tui.app.app import TorchperfApp


def test_the_ui_process_never_imports_torch_even_after_a_run(tmp_path):
    # In a fresh interpreter: pytest's own process has imported torch for other tests.
    script = textwrap.dedent("""
        import asyncio, sys
        from torchperf_tui.app.app import TorchperfApp
        from tests.app.helpers import flip, run_custom_model, wait_ready, wait_until

        async def main():
            app = TorchperfApp(poll_telemetry=True, warmup=1, iters=5, model="tests.tinymodels:tiny_cnn",
                               autostart=True)
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
                print("status", app.session.runs.get(1).status, len(app.session.runs.get(1).samples_ms))
                print("torch imported:", "torch" in sys.modules, "scipy imported:", "scipy" in sys.modules)

        asyncio.run(main())
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                          env={**__import__("os").environ, "TORCHPERF_HISTORY": str(tmp_path / "h.jsonl")})
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "status done 5" in proc.stdout
    assert "torch imported: False scipy imported: False" in proc.stdout


async def test_a_model_that_kills_its_process_fails_its_run_and_the_next_run_works():
    app = TorchperfApp(poll_telemetry=False, warmup=1, iters=5)
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
