"""The Device tab's measured ceilings (key C): none kept says how to get them; C measures in the measurement
process the best of several workloads per dtype and keeps them, saying which gave each; the next roofline gives
MFU against them, and a utilisation above a (too low) ceiling is never shown as a fact."""

from __future__ import annotations

import json
import os

import pytest

from tests.app.helpers import run_and_wait, screen_text, wait_until

# The ceilings kept are read from this test's TORCHPERF_CEILINGS, which a process started for another test never sees.
pytestmark = pytest.mark.own_process


async def test_c_measures_the_ceilings_keeps_them_and_the_next_roofline_uses_them(tiny_app):
    async with tiny_app(size=(120, 40), warmup=0, iters=4) as pilot:
        app = pilot.app
        await pilot.press("4")
        await wait_until(pilot, lambda: "Measured ceilings" in screen_text(app, "#device-ceilings"),
                         what="the kept ceilings read")
        assert "none yet. Press C" in screen_text(app, "#device-ceilings")
        await pilot.press("C")
        await wait_until(pilot, lambda: "kept in" in screen_text(app, "#device-ceilings"), what="the ceilings",
                         timeout=300)
        text = screen_text(app, "#device-ceilings")
        assert "compute float32: " in text and "TFLOP/s" in text and "copy (read + write)" in text
        assert "(best of " in text and " thread" in text  # which workload and thread count gave it, of how many
        kept = json.loads(open(os.environ["TORCHPERF_CEILINGS"]).read())["devices"]
        assert len(kept) == 1 and len(next(iter(kept.values()))["ceilings"][0]["tried"]) >= 9
        await pilot.press("1")
        await run_and_wait(pilot)
        await wait_until(pilot, lambda: "roofline" in screen_text(app, "#run-roofline"), what="the roofline")
        assert "MFU n/a" not in screen_text(app, "#run-roofline")  # on the CPU the measured ceiling is the peak


def _keep(ceiling_flops: float, fmt: int = 2) -> None:
    """Keep ceilings for this box's CPU as if measured (the test process may load torch; the app's may not)."""
    import torch

    from torchperf_tui.engine.hardware.ceilings import Ceiling, CeilingsResult, device_key, save_ceilings

    save_ceilings(CeilingsResult(device="cpu", key=device_key(torch.device("cpu")), measured_at=1.0, format=fmt,
                                 ceilings=[Ceiling("compute", "float32", ceiling_flops, "64x64x64", 0.5, 3),
                                           Ceiling("copy", "float32", 1e12, "1 MiB", 1e-6, 3)]))


async def test_an_mfu_above_a_too_low_ceiling_says_so_and_offers_to_measure_again(tiny_app):
    _keep(1e3)  # 1 kFLOP/s: any model beats it
    async with tiny_app(size=(120, 40), warmup=0, iters=4, device="cpu") as pilot:
        app = pilot.app
        await run_and_wait(pilot)
        await wait_until(pilot, lambda: "roofline" in screen_text(app, "#run-roofline"), what="the roofline")
        line = " ".join(screen_text(app, "#run-roofline").split())
        assert "MFU above the measured ceiling (" in line
        assert "the ceiling is too low; measure again with C / torchperf-tui ceilings --refresh" in line


async def test_an_earlier_versions_kept_ceilings_are_marked_outdated_on_the_device_tab(tiny_app):
    _keep(3.2e11, fmt=1)
    async with tiny_app(size=(120, 40), device="cpu") as pilot:
        app = pilot.app
        await pilot.press("4")
        await wait_until(pilot, lambda: "kept in" in screen_text(app, "#device-ceilings"), what="the kept ceilings")
        text = " ".join(screen_text(app, "#device-ceilings").split())
        assert "outdated: kept by an earlier torchperf-tui from one 2048x2048x2048 matmul" in text
