"""SVG snapshots of the main screen (pytest-textual-snapshot): a CPU box and a fake H100.

Deterministic by construction: a fixed DeviceReport (CPU facts pinned), a frozen telemetry source,
no timing run, no periodic polling, and text cursors not blinking. Update with --snapshot-update.
"""

from __future__ import annotations

from tests.app.helpers import FrozenTelemetry, cpu_report, gpu_report_and_fakes, wait_ready, wait_until
from torchperf_tui.app.app import TorchperfApp


def frozen_app(gpu: bool) -> TorchperfApp:
    if gpu:
        report, fake_nvml, fake_cuda = gpu_report_and_fakes()
        return TorchperfApp(device_report=report, nvml=fake_nvml, cuda=fake_cuda,
                            telemetry=FrozenTelemetry(gpu=True), poll_telemetry=False)
    return TorchperfApp(device_report=cpu_report(), telemetry=FrozenTelemetry(gpu=False), poll_telemetry=False)


def press_then_settle(*keys: str):
    async def run_before(pilot) -> None:
        await wait_ready(pilot)
        await wait_until(pilot, lambda: pilot.app.last_telemetry is not None, what="the frozen sample")
        for field in pilot.app.query("Input"):
            field.cursor_blink = False
        await pilot.press(*keys)
        await pilot.wait_for_scheduled_animations()
        # Charts redraw at most once a second; let the last one land, and the Tabs underline settle.
        await pilot.pause(1.2)
        await pilot.wait_for_scheduled_animations()

    return run_before


class TestCpuBox:
    """On a box without CUDA: the picker, the flags (CUDA ones disabled with the reason), the panes."""

    def test_main_screen_80x24(self, snap_compare):
        """The first screen a user sees over SSH in a small terminal."""
        assert snap_compare(frozen_app(gpu=False), terminal_size=(80, 24), run_before=press_then_settle())

    def test_device_tab_says_why_there_is_no_cuda(self, snap_compare):
        """The device tab shows the CPU facts and a plain line that no CUDA device / NVML was found."""
        assert snap_compare(frozen_app(gpu=False), terminal_size=(100, 30), run_before=press_then_settle("4"))

    def test_memory_tab_shows_rss_and_ram(self, snap_compare):
        """On the CPU the memory tab shows system RAM as a bar and this process's RSS over time."""
        assert snap_compare(frozen_app(gpu=False), terminal_size=(100, 30), run_before=press_then_settle("5"))


class TestFakeH100:
    """With the fake NVML / CUDA seams: an H100's facts, peaks and memory."""

    def test_device_tab(self, snap_compare):
        """GPU name, SMs, clocks, peak FLOPS and bandwidth with their formulas; CUDA flags enabled."""
        assert snap_compare(frozen_app(gpu=True), terminal_size=(110, 32), run_before=press_then_settle("4"))

    def test_memory_tab(self, snap_compare):
        """NVML used/total as a bar and a chart, utilisation, temperature, power and the allocator's gap."""
        assert snap_compare(frozen_app(gpu=True), terminal_size=(110, 32), run_before=press_then_settle("5"))
