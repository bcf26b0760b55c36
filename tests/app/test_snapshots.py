"""SVG snapshots of the main screen (pytest-textual-snapshot): a CPU box and a fake H100.

Deterministic by construction: a fixed DeviceReport (CPU facts pinned), a frozen telemetry source,
no timing run, no periodic polling, and text cursors not blinking. Update with --snapshot-update.
"""

from __future__ import annotations

from tests.app.helpers import FrozenTelemetry, cpu_report, gpu_report_and_fakes, wait_ready, wait_until
from tests.fakes.fake_measurement import FakeMeasurement
from torchperf_tui.app.app import TorchperfApp
from torchperf_tui.measure.client import MeasurementProcess


def frozen_app(gpu: bool, **options) -> TorchperfApp:
    if gpu:
        report, fake_nvml, fake_cuda = gpu_report_and_fakes()
        return TorchperfApp(device_report=report, nvml=fake_nvml, cuda=fake_cuda,
                            telemetry=FrozenTelemetry(gpu=True), poll_telemetry=False, **options)
    return TorchperfApp(device_report=cpu_report(), telemetry=FrozenTelemetry(gpu=False), poll_telemetry=False,
                        **options)


def press_then_settle(*keys: str):
    async def run_before(pilot) -> None:
        await wait_ready(pilot)
        await wait_until(pilot, lambda: pilot.app.pane("memory").last_telemetry is not None, what="the frozen sample")
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


def synthetic_ab(app):
    """A finished A/B of cudnn.benchmark off (A) vs on (B) with fixed samples: B about 15 % faster."""
    import numpy as np

    from torchperf_tui.app.runs import LiveRun
    from torchperf_tui.engine.benchmark.abtest import ABResult, ArmResult, block_order, block_verdict

    rng = np.random.default_rng(7)
    a_blocks = [list(6.0 + 0.2 * rng.standard_normal(10)) for _ in range(10)]
    b_blocks = [list(5.1 + 0.2 * rng.standard_normal(10)) for _ in range(10)]
    flags_a = app.pane("flags").flags
    flags_b = flags_a.replace(cudnn_benchmark=True)
    arms, run_ids = [], []
    for name, flags, blocks in (("A", flags_a, a_blocks), ("B", flags_b, b_blocks)):
        arm = ArmResult(spec=flags.describe("cuda"), flags=flags, dtype="float32", channels_last=False, blocks=blocks)
        arm.summarise()
        arms.append(arm)
        run_ids.append(app.session.new_run_id())
        app.session.runs.add(LiveRun(run_id=run_ids[-1], model="resnet50", device="cuda:0",
                                     flags=flags, flags_text=flags.describe("cuda"), arm=name, status="timed"))
    app.pane("compare").ab_runs = tuple(run_ids)
    app.session.runs.baseline_id = run_ids[0]
    return ABResult(model="resnet50", device="cuda:0", input_shape=(1, 3, 224, 224), a=arms[0],
                                 b=arms[1], order=block_order(10, 0), verdict=block_verdict(a_blocks, b_blocks),
                                 cancelled=False, duration_s=4.2)


def synthetic_kernels():
    from torchperf_tui.engine.analysis.kernels import CUDA_NOTE, KernelComparison, KernelTime, LayerKernels

    gemm = "void cudnn::cnn::implicit_convolve_sgemm<float, float, 1024, 5, 5, 3, 3, 3, 1, false, false, true>"
    wino = "void cudnn::winograd_nonfused::winogradForwardData4x4<float, float>(cudnn::winograd_nonfused::Params)"
    fft = "sm80_xmma_fprop_implicit_gemm_tf32f32_tf32f32_f32_nhwckrsc_nchw_tilesize128x128x16_stage4_kernel"
    layers = [LayerKernels("conv1", [KernelTime(gemm, 88.0, 1)], [KernelTime(fft, 52.0, 1)]),
              LayerKernels("layer1.0.conv1", [KernelTime(gemm, 41.0, 1)], [KernelTime(wino, 23.0, 1)]),
              LayerKernels("layer1.0.conv2", [KernelTime(gemm, 40.0, 1)], [KernelTime(gemm, 40.5, 1)]),
              LayerKernels("layer3.0.conv2", [KernelTime(gemm, 41.0, 1)], [KernelTime(wino, 23.0, 1)])]
    return KernelComparison(model="resnet50", device="cuda:0", input_shape=(1, 3, 224, 224), a_spec="defaults",
                            b_spec="cudnn.benchmark=on", layers=layers, kind="cuda-kernel", note=CUDA_NOTE, iters=3)


def deliver(app, pane, slot: str, kind: str, result) -> None:
    """`pane` asks for a job of `kind` in `slot`, and the app's fake measurement process answers it with `result`.
    (The results are a resnet50's on an H100, which no key press on this box can produce: a user's `a` or `k`
    would first choose a model and flip a flag, and the sidebar would show them.)"""
    app.session.measure.answers[kind] = result
    pane.jobs.start(slot, kind, {}, f"the recorded {kind} answer")


def settle_then(post):
    """press_then_settle, with `post(app)` posting a finished result as the measurement process's answer would."""
    async def run_before(pilot) -> None:
        await press_then_settle()(pilot)
        post(pilot.app)
        await pilot.pause(0.3)
        await pilot.wait_for_scheduled_animations()
        await pilot.pause(1.2)

    return run_before


class TestTradeOffs:
    """Issue 6's views on the fake H100, filled with fixed results (no timing in a snapshot)."""

    def test_compare_view_with_a_verdict(self, snap_compare):
        """A vs B with each arm's median and CI, the verdict line, the table and both histograms overlaid."""
        def post(app):
            app.main.show_tab("compare")
            deliver(app, app.pane("compare"), "ab", "ab", synthetic_ab(app))

        assert snap_compare(frozen_app(gpu=True, measurement=FakeMeasurement(real=MeasurementProcess)),
                            terminal_size=(110, 32), run_before=settle_then(post))

    def test_kernel_table(self, snap_compare):
        """Per conv layer: the kernel under A and under B with its time; changed layers marked."""
        def post(app):
            app.main.show_tab("kernels")
            deliver(app, app.pane("kernels"), "kernels", "kernels", synthetic_kernels())

        assert snap_compare(frozen_app(gpu=True, measurement=FakeMeasurement(real=MeasurementProcess)),
                            terminal_size=(110, 32), run_before=settle_then(post))


def synthetic_runs(app, *flag_sets: dict) -> list:
    """Finished timing runs of the chosen (tiny) model on the CPU with fixed samples, one per set of flags, kept
    as a run's answer is, the last one current in the Timing pane."""
    import numpy as np

    from torchperf_tui.app.messages import RunsChanged
    from torchperf_tui.app.runs import LiveRun
    from torchperf_tui.engine.benchmark.stats import compute_stats

    rng = np.random.default_rng(11)
    records = []
    for i, changes in enumerate(flag_sets):
        flags = app.pane("flags").flags.replace(**changes)
        samples = list(20.0 - 2.0 * i + rng.gamma(2.0, 0.6, 60))
        record = LiveRun(run_id=app.session.new_run_id(), model=app.pane("picker").spec, device="cpu",
                           flags=flags, flags_text=flags.describe("cpu"), status="done",
                           input_text="1x3x32x32 float32", first_iter_ms=85.0, warmup_ms=samples[:10],
                           samples_ms=samples, stats=compute_stats(samples, batch=1))
        app.session.runs.add(record)
        records.append(record)
    timing = app.pane("timing")
    timing.record = records[-1]
    timing.show_run(records[-1])
    app.post_message(RunsChanged())
    return records


def with_tiny_model(post=None, key: str = ""):
    """press_then_settle, the tiny model chosen as a user types it, then `post(app)` and `key`."""
    async def run_before(pilot) -> None:
        from tests.app.helpers import choose_model

        await press_then_settle()(pilot)
        await choose_model(pilot, shape="3x32x32")
        for field in pilot.app.query("Input"):
            field.cursor_blink = False
        if post is not None:
            post(pilot.app)
        if key:
            await pilot.press(key)
        await pilot.pause(0.3)
        await pilot.wait_for_scheduled_animations()
        await pilot.pause(1.2)
        await pilot.wait_for_scheduled_animations()

    return run_before


def history_file() -> str:
    """A history of four saved runs of three models with pinned ids and dates, at a fixed path (the History tab
    shows it). Written beside it and renamed over it, never removed first: another run of the suite on the same
    box (or another xdist worker) may be reading it at that moment."""
    import os
    import tempfile
    from pathlib import Path

    from tests.records import make_record
    from torchperf_tui.engine.records.history_file import HistoryFile

    folder = Path(tempfile.gettempdir()) / "torchperf-snapshot-history"
    folder.mkdir(exist_ok=True)
    path = folder / "history.jsonl"
    handle, fresh = tempfile.mkstemp(dir=folder, prefix=".history.", suffix=".tmp")
    os.close(handle)
    records = []
    for i, (model, p50, flags) in enumerate((("resnet18", 21.0, {}), ("resnet18", 19.5, {"mkldnn_enabled": False}),
                                             ("mobilenet_v3_small", 6.2, {}), ("vit_b_16", 88.0, {}))):
        record = make_record(p50, p50 * 1.6, model=model, record_id=f"r{i:07d}")
        if flags:
            record.flags = {**record.flags, **flags}
            record.flags_text = ", ".join(f"{k}={v}" for k, v in flags.items())
        records.append(record)
    HistoryFile(fresh).extend(records)  # appended to the empty file
    os.replace(fresh, path)
    return str(path)


class TestAt80x24:
    """The views the README promises at 80x24, the sidebar shown: Timing, Compare, Layers and History."""

    def test_timing_after_a_run(self, snap_compare):
        """The run's lines one row each and a histogram that keeps its bars."""
        assert snap_compare(frozen_app(gpu=False), terminal_size=(80, 24),
                            run_before=with_tiny_model(lambda app: synthetic_runs(app, {})))

    def test_compare_two_runs(self, snap_compare):
        """Two runs like for like: the speed-up in sight, the overlay with its series named on its caption."""
        assert snap_compare(frozen_app(gpu=False), terminal_size=(80, 24),
                            run_before=with_tiny_model(lambda app: synthetic_runs(app, {}, {"mkldnn_enabled": False}),
                                                       key="2"))

    def test_layers_of_a_model(self, snap_compare):
        """The tiny model's layer table with FLOPs in sight."""
        assert snap_compare(frozen_app(gpu=False), terminal_size=(80, 24), run_before=with_tiny_model(key="3"))

    def test_history_with_models(self, snap_compare):
        """Saved runs with their model in sight."""
        app = frozen_app(gpu=False, history_path=history_file())
        assert snap_compare(app, terminal_size=(80, 24), run_before=press_then_settle("8"))
