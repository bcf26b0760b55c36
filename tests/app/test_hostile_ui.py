"""The app refuses bad options where they enter and never writes over what is not a regular file."""

from __future__ import annotations

import math
import os

import pytest

from tests.app.helpers import make_app
from torchperf_tui.core.output_files import OutputPathError
from torchperf_tui.core.options import OptionError


@pytest.mark.parametrize("interval", [math.nan, math.inf, 1e-9, 0.0, -1.0, 3600.0])
def test_a_telemetry_interval_that_would_flood_or_starve_the_loop_is_refused(interval):
    with pytest.raises(OptionError, match="interval"):
        make_app(interval=interval)


async def test_a_screenshot_never_replaces_a_directory_and_the_palettes_goes_where_s_does(tmp_path):
    app = make_app(screenshot_dir=str(tmp_path))
    async with app.run_test(size=(80, 24)) as pilot:
        from tests.app.helpers import wait_until

        await wait_until(pilot, app.main.panes_mounted, what="the panes")
        (tmp_path / "shot.svg").mkdir()
        with pytest.raises(OutputPathError, match="a directory"):
            app.save_screenshot(filename="shot.svg", path=str(tmp_path))
        assert (tmp_path / "shot.svg").is_dir()
        app.deliver_screenshot()  # the command palette's "Save screenshot"
        await pilot.pause(0.1)
        saved = [p for p in tmp_path.glob("*.svg") if p.is_file()]
        assert len(saved) == 1 and saved[0].read_text().startswith("<svg")
        assert not list(tmp_path.glob("*.tmp")) and not list(tmp_path.glob(".*.tmp"))


@pytest.mark.own_process  # what the process does with a model that exits
async def test_a_model_calling_sys_exit_fails_its_run_and_the_app_keeps_running():
    from tests.app.helpers import run_custom_model, wait_ready, wait_until

    app = make_app(warmup=1, iters=3)
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_ready(pilot)
        await run_custom_model(pilot, "tests.hostilemodels:exits_when_timed")
        await wait_until(pilot, lambda: app.session.runs.get(1) is not None and app.session.runs.get(1).status == "failed",
                         what="the run to fail")
        assert "called sys.exit(7)" in app.session.runs.get(1).error
        assert app.is_running


def test_screenshots_go_to_the_configured_folder_never_the_current_directory(tmp_path, monkeypatch):
    from torchperf_tui.app import screenshots

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(screenshots.SCREENSHOTS_ENV, str(tmp_path / "shots"))
    assert screenshots.default_dir() == str(tmp_path / "shots")
    monkeypatch.delenv(screenshots.SCREENSHOTS_ENV)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    folder = screenshots.default_dir()
    assert folder.startswith(str(tmp_path / "data")) and folder.endswith("screenshots") and os.path.isdir(folder)
