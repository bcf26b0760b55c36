"""A GPU run's conditions on screen: the Timing pane says the clocks, temperature, power, energy per inference
and throttling of the run it shows; the Compare view says each arm's and the note on the arm that throttled more.
The fake H100 has no real runs: a user's r and a are answered by the fake measurement process with recorded
results that carry the GPU's conditions (tests/app/recorded_answers.py)."""

from __future__ import annotations

from types import SimpleNamespace

from tests.app.helpers import choose_model, flip, make_app, run_and_wait, screen_text, wait_ready, wait_until
from tests.app.recorded_answers import NOT_PLACED, TimedRuns, recorded_ab
from torchperf_tui.engine.hardware.input_copy import estimate_input_copy
from torchperf_tui.engine.hardware.run_conditions import RunConditions, throttle_note
from torchperf_tui.wording.timing import input_copy_text


def _conditions(throttled: float) -> RunConditions:
    return RunConditions(gpu_index=0, readings=40, window_s=4.0, windows=1, window_median_s=4.0, sm_clock_mhz=1980 - 400 * throttled,
                         sm_clock_min_mhz=1410 if throttled else 1980, sm_clock_max_mhz=1980, mem_clock_mhz=2619,
                         temperature_start_c=45, temperature_max_c=71, power_mean_w=612.0, power_max_w=700.0,
                         reasons={"power cap (software)": throttled} if throttled else {"GPU idle": 0.05},
                         throttled_share=throttled, energy_j=24.0, items=640,
                         energy_method="NVML energy counter across the timed iterations, gaps included")


def _timed_app(conditions: RunConditions):
    """The fake H100 whose timing runs are answered with a recorded run over which the GPU had `conditions`."""
    return make_app(gpu=True, frozen=True,
                    answers={"time": TimedRuns(device="cuda:0", conditions=conditions), "roofline": NOT_PLACED})


async def _show_run(pilot) -> str:
    """The tiny model chosen and r pressed: the Timing pane's lines once they say the run's GPU."""
    await wait_ready(pilot)
    await choose_model(pilot)
    await run_and_wait(pilot)
    await wait_until(pilot, lambda: "GPU over run #1" in screen_text(pilot.app, "#run-stats"), what="the run's GPU")
    return screen_text(pilot.app, "#run-stats")


async def test_the_timing_pane_says_the_gpu_clocks_power_and_energy_of_its_run():
    app = _timed_app(_conditions(0.0))
    async with app.run_test(size=(110, 40)) as pilot:
        text = await _show_run(pilot)
        assert "GPU over run #1: SM 1980/1980 MHz · 71 °C · 612 W · 37.5 mJ/inference · not throttled" in text


async def test_a_throttled_run_says_so_with_its_reasons_and_at_80x24_in_one_line():
    app = _timed_app(_conditions(0.4))
    async with app.run_test(size=(110, 40)) as pilot:
        text = await _show_run(pilot)
        assert "THROTTLED 40 %: power cap (software)" in text
        assert "throttled: power cap (software) in 40 % of 40 readings (SM clock median 1820 MHz, lowest 1410" in text
    app = _timed_app(_conditions(0.4))
    async with app.run_test(size=(80, 24)) as pilot:
        text = await _show_run(pilot)
        assert "GPU over run #1: SM 1820/1980 MHz · 37.5 mJ/inference · THROTTLED 40 %: power cap (software)" in text
        assert "40 % of 40 readings" not in text


async def test_a_gpu_run_says_what_copying_its_inputs_from_the_host_would_add_and_at_80x24_in_brief():
    kept = SimpleNamespace(transfer=lambda direction, memory: SimpleNamespace(value=55e9 if memory == "pinned"
                                                                               else 20e9))
    copy = estimate_input_copy(8 * 3 * 224 * 224 * 4, 2.0, kept)  # a batch of 8 images over the H200's transfers
    for size, line in (((110, 40), "input copy (estimate): " + input_copy_text(copy)),
                       ((80, 24), "input copy (estimate): 4.6 MiB a pass from the host: pinned 4.2 %, pageable "
                                  "10.7 % of copy + pass (estimated)")):
        app = make_app(gpu=True, frozen=True, answers={"time": TimedRuns(device="cuda:0", conditions=_conditions(0.0),
                                                                         input_copy=copy), "roofline": NOT_PLACED})
        async with app.run_test(size=size) as pilot:
            text = await _show_run(pilot)
            assert line in text.replace("\n", " ") or line in text, (size, text)
    missing = estimate_input_copy(4096, 2.0, None)  # no transfers kept for the GPU: said why, and how to measure them
    app = make_app(gpu=True, frozen=True, answers={"time": TimedRuns(device="cuda:0", conditions=_conditions(0.0),
                                                                     input_copy=missing), "roofline": NOT_PLACED})
    async with app.run_test(size=(110, 40)) as pilot:
        text = await _show_run(pilot)
        assert "input copy (estimate): not estimated: no measured host-to-device ceilings kept" in text


async def test_the_compare_view_says_each_arms_gpu_and_the_throttle_note():
    calm, throttled = _conditions(0.0), _conditions(0.5)
    app = make_app(gpu=True, frozen=True,
                   answers={"ab": recorded_ab(conditions=(calm, throttled), notes=(throttle_note(calm, throttled),))})
    async with app.run_test(size=(110, 40)) as pilot:
        await wait_ready(pilot)
        await flip(pilot, "cudnn_benchmark")  # before a model is chosen: the flip starts no run
        await choose_model(pilot)
        await pilot.press("a")
        await wait_until(pilot, lambda: "GPU  A" in screen_text(pilot.app, "#compare-verdict"), what="the verdict")
        text = screen_text(pilot.app, "#compare-verdict")
        assert ("GPU  A SM 1980/1980 MHz · 37.5 mJ/inference · not throttled  |  B SM 1780/1980 MHz · 37.5 "
                "mJ/inference · THROTTLED 50 %: power cap (software)") in text
        assert "note: B ran throttled more than A (power cap (software) in 50 % of its readings, 0 % of A's" in text
