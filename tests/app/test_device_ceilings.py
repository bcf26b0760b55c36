"""The Device tab's measured ceilings (key C): none kept says how to get them; C measures in the measurement
process and keeps them; the next roofline gives MFU against them."""

from __future__ import annotations

import json
import os

from tests.app.helpers import run_and_wait, screen_text, wait_until


async def test_c_measures_the_ceilings_keeps_them_and_the_next_roofline_uses_them(tiny_app):
    async with tiny_app(size=(120, 40), warmup=0, iters=4) as pilot:
        app = pilot.app
        await pilot.press("4")
        await wait_until(pilot, lambda: "Measured ceilings" in screen_text(app, "#device-ceilings"),
                         what="the kept ceilings read")
        assert "none yet. Press C" in screen_text(app, "#device-ceilings")
        await pilot.press("C")
        await wait_until(pilot, lambda: "kept in" in screen_text(app, "#device-ceilings"), what="the ceilings")
        text = screen_text(app, "#device-ceilings")
        assert "matmul float32 2048x2048x2048: " in text and "TFLOP/s" in text and "copy (read + write)" in text
        kept = json.loads(open(os.environ["TORCHPERF_CEILINGS"]).read())["devices"]
        assert len(kept) == 1
        await pilot.press("1")
        await run_and_wait(pilot)
        await wait_until(pilot, lambda: "roofline" in screen_text(app, "#run-roofline"), what="the roofline")
        assert "MFU n/a" not in screen_text(app, "#run-roofline")  # on the CPU the measured ceiling is the peak
