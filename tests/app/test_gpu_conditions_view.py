"""A GPU run's conditions on screen: the Timing pane says the clocks, temperature, power, energy per inference
and throttling of the run it shows; the Compare view says each arm's and the note on the arm that throttled more.
Results are built here (the fake H100 has no real runs) and delivered as the measurement process would."""

from __future__ import annotations

from types import SimpleNamespace

from tests.app.helpers import screen_text, wait_until
from tests.fakes.fake_measurement import FakeMeasurement
from tests.app.test_snapshots import deliver, frozen_app, press_then_settle, synthetic_ab, synthetic_runs
from torchperf_tui.engine.hardware.run_conditions import RunConditions
from torchperf_tui.measure.client import MeasurementProcess


def _conditions(throttled: float) -> RunConditions:
    return RunConditions(gpu_index=0, readings=40, window_s=4.0, sm_clock_mhz=1980 - 400 * throttled,
                         sm_clock_min_mhz=1410 if throttled else 1980, sm_clock_max_mhz=1980, mem_clock_mhz=2619,
                         temperature_start_c=45, temperature_max_c=71, power_mean_w=612.0, power_max_w=700.0,
                         reasons={"power cap (software)": throttled} if throttled else {"GPU idle": 0.05},
                         throttled_share=throttled, energy_j=24.0, items=640,
                         energy_method="NVML energy counter across the timed iterations, gaps included")


async def _show_run(pilot, conditions: RunConditions) -> str:
    await press_then_settle()(pilot)
    record = synthetic_runs(pilot.app, {})[-1]
    record.result = SimpleNamespace(conditions=conditions, step="infer", budget_stopped=False)
    pilot.app.main.show_tab("timing")
    pilot.app.pane("timing").show_run(record)
    await pilot.pause(0.1)
    return screen_text(pilot.app, "#run-stats")


async def test_the_timing_pane_says_the_gpu_clocks_power_and_energy_of_its_run():
    app = frozen_app(gpu=True)
    async with app.run_test(size=(110, 40)) as pilot:
        text = await _show_run(pilot, _conditions(0.0))
        assert "GPU over run #1: SM 1980/1980 MHz · 71 °C · 612 W · 37.5 mJ/inference · not throttled" in text


async def test_a_throttled_run_says_so_with_its_reasons_and_at_80x24_in_one_line():
    app = frozen_app(gpu=True)
    async with app.run_test(size=(110, 40)) as pilot:
        text = await _show_run(pilot, _conditions(0.4))
        assert "THROTTLED 40 %: power cap (software)" in text
        assert "throttled: power cap (software) in 40 % of 40 readings (SM clock median 1820 MHz, lowest 1410" in text
    app = frozen_app(gpu=True)
    async with app.run_test(size=(80, 24)) as pilot:
        text = await _show_run(pilot, _conditions(0.4))
        assert "GPU over run #1: SM 1820/1980 MHz · 37.5 mJ/inference · THROTTLED 40 %: power cap (software)" in text
        assert "40 % of 40 readings" not in text


async def test_the_compare_view_says_each_arms_gpu_and_the_throttle_note():
    app = frozen_app(gpu=True, measurement=FakeMeasurement(real=MeasurementProcess))
    async with app.run_test(size=(110, 40)) as pilot:
        await press_then_settle()(pilot)
        result = synthetic_ab(pilot.app)
        result.a.conditions, result.b.conditions = _conditions(0.0), _conditions(0.5)
        from torchperf_tui.engine.hardware.run_conditions import throttle_note

        result.notes.append(throttle_note(result.a.conditions, result.b.conditions))
        pilot.app.main.show_tab("compare")
        deliver(pilot.app, pilot.app.pane("compare"), "ab", "ab", result)
        await wait_until(pilot, lambda: "GPU  A" in screen_text(pilot.app, "#compare-verdict"), what="the verdict")
        text = screen_text(pilot.app, "#compare-verdict")
        assert ("GPU  A SM 1980/1980 MHz · 37.5 mJ/inference · not throttled  |  B SM 1780/1980 MHz · 37.5 "
                "mJ/inference · THROTTLED 50 %: power cap (software)") in text
        assert "note: B ran throttled more than A (power cap (software) in 50 % of its readings, 0 % of A's" in text
