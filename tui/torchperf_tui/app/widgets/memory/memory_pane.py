"""Memory pane: live NVML memory (bar and time-series chart), utilisation, temperature and power, beside
the torch allocator's allocated / reserved / peak of the measurement process (which holds the model); on a
CPU box that process's RSS and system RAM. It owns the telemetry thread, the allocator readings, the memory
release (key e) and the CUDA memory snapshot (key n), all but the first run in the measurement process."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections import deque
from typing import Any

from textual import on, work
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.message import Message
from textual.widgets import Static
from textual.worker import get_current_worker

from torchperf_tui.core.formatting import format_bytes, format_number, is_number
from torchperf_tui.app.pane_jobs import PaneJobs
from torchperf_tui.app.messages import JobEvent
from torchperf_tui.measure.protocol import JobFailed
from torchperf_tui.app.widgets.memory.memory_chart import MemoryChart
from torchperf_tui.app.widgets.memory.memory_snapshot import snapshot_answered, start_snapshot
from torchperf_tui.app.widgets.memory.usage_bar import UsageBar
from torchperf_tui.engine.hardware.telemetry import process_gpu_memory, release_memory
from torchperf_tui.core.errors import user_message
from torchperf_tui.engine.hardware import telemetry
from torchperf_tui.engine.hardware.nvml import NA

GIB = 1024 ** 3


def memory_series(history, gpu_index: int | None) -> tuple[list[tuple[float, float]], str]:
    """(seconds ago, GiB used) points: NVML used memory for a GPU, else this process's RSS."""
    if not history:
        return [], ""
    now = history[-1].timestamp
    points = []
    for sample in history:
        if gpu_index is not None:
            gpu = next((g for g in sample.gpus if g.index == gpu_index), None)
            value = gpu.mem_used_bytes if gpu is not None else None
        else:
            value = sample.process_rss_bytes
        if is_number(value):
            points.append((sample.timestamp - now, value / GIB))
    return points, ("GPU used (NVML)" if gpu_index is not None else "process RSS")


def run_series(trace, kind: str, now: float, since: float) -> list[tuple[str, list[tuple[float, float]]]]:
    """The latest run's memory between iterations, as (label, points) on the chart's clock."""
    points = [(t - now, alloc / GIB, reserved / GIB) for t, alloc, reserved in trace if t - now >= since]
    if kind == "cuda-allocator":
        return [("allocated, per iteration", [(x, a) for x, a, _ in points]),
                ("reserved, per iteration", [(x, r) for x, _, r in points])]
    if kind == "rss":
        return [("RSS, per iteration", [(x, a) for x, a, _ in points])]
    return []


def release_marks(releases, now: float) -> list[tuple[float, str]]:
    """A vertical mark per memory release: when, and what it freed."""
    return [(t - now, f"freed {format_bytes(report.released_bytes)}") for t, report in releases]


def process_gpu_text(used, reserved) -> str:
    """NVML's count for the measurement process beside the allocator's reserved, and what the gap is."""
    if not is_number(used):
        return f"  the process on the GPU (NVML): {used}"
    outside = used - reserved
    return (f"  the process on the GPU (NVML): {format_bytes(used)} · outside the caching allocator: "
            f"[b]{format_bytes(max(outside, 0))}[/] (the CUDA context and non-PyTorch allocations)")


class MemoryPane(Vertical):
    """Telemetry at the app's interval (NVML, psutil) from a thread of this pane, and the measurement
    process's allocator between measurements. Jobs: "memory" (a reading), "release", "memsnap"."""

    DEFAULT_CSS = """
    MemoryPane { height: 1fr; }
    MemoryPane > Static { height: auto; }
    """

    @dataclasses.dataclass
    class Tick(Message):
        """A fresh TelemetrySample and the sampler's history (the newest replaces an unhandled older one)."""

        sample: Any
        history: list
        gpu_bytes: Any = None  # NVML's used memory for the measurement process's pid (None off CUDA)

        def can_replace(self, message: Message) -> bool:
            return isinstance(message, MemoryPane.Tick)

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.jobs = PaneJobs(self)
        self.sampler: Any = None
        self._injected = False  # a test's frozen source: shown as it is
        self._wake = threading.Event()
        self._gpu_index: int | None = None  # read by the telemetry thread: set on the UI thread each tick
        self._pid: int | None = None
        self._on_cuda = False
        self.last_telemetry: tuple | None = None  # (sample, history)
        self.allocator_reading: dict | None = None  # the measurement process's allocator and RSS, when idle
        self.gpu_bytes: Any = None
        self.last_release = None
        self.releases: deque = deque(maxlen=16)

    def compose(self) -> ComposeResult:
        yield Static("loading…", id="mem-title", classes="loading")
        yield UsageBar(id="mem-bar")
        yield Static("", id="mem-device")
        yield Static("", id="mem-allocator")
        yield MemoryChart(id="mem-chart")
        yield Static("e: release memory (gc + empty_cache / malloc_trim)", id="mem-hint", classes="dim-note")

    # -- telemetry ---------------------------------------------------------------------------------
    def start_telemetry(self, interval: float, poll: bool) -> None:
        """Open the sampler (the engine is loaded) and sample every `interval` s, or once (`poll=False`)."""
        session = self.app.session
        self.sampler = session.telemetry_source
        self._injected = self.sampler is not None
        if self.sampler is None and session.has("telemetry"):
            try:
                # The caching allocator lives in the measurement process: its readings come from there.
                cuda = session.cuda_seam if session.cuda_seam is not None else telemetry.ALLOCATOR_ELSEWHERE
                self.sampler = telemetry.TelemetrySampler(nvml=session.nvml_handle(), cuda=cuda)
            except Exception as exc:
                self.show_error(user_message(exc))
        if session.measurement_pid is not None:
            self.follow_process(session.measurement_pid)
        self._telemetry_loop()
        if poll:
            self.set_interval(interval, self.request_sample)
        else:
            self.request_sample()

    def follow_process(self, pid: int) -> None:
        """A (new) measurement process: its RSS on the chart, its old figures gone with the old one."""
        self.allocator_reading = None
        self._pid = pid
        if self.sampler is not None and not self._injected:
            self.sampler.follow_process(pid)

    def request_sample(self) -> None:
        """Wake the sampling thread (a tick is skipped while it is busy). Skipped while a run measures on the
        CPU: there the model's threads fill the cores this process would wake on, and the run's own memory
        trace (RSS per iteration) is what the chart shows meanwhile."""
        session = self.app.session
        if session.device_kind() == "cpu" and any(j.running for j in session.measuring({"time", "ab", "generate"})):
            if self.last_telemetry is not None and self.screen.active_tab() == "memory":
                self._show(*self.last_telemetry)  # the run's trace grows meanwhile
            return
        self._gpu_index = session.gpu_index()
        self._on_cuda = session.device_kind() == "cuda"
        self._pid = session.measurement_pid
        self._wake.set()

    @work(thread=True, group="telemetry", exit_on_error=False)
    def _telemetry_loop(self) -> None:
        """One long-lived thread samples when woken: NVML can block (a GPU falling off the bus) and must never
        stall the UI, and one thread costs less than a worker per tick."""
        worker = get_current_worker()
        while not worker.is_cancelled:
            # No timeout: a thread that wakes on its own every fraction of a second preempts the model's
            # threads on a small box. Unmounting sets the event so that the loop sees its cancel.
            self._wake.wait()
            self._wake.clear()
            if worker.is_cancelled or self.sampler is None:
                continue
            try:
                sample = self.sampler.sample()
                self.post_message(self.Tick(sample, list(self.sampler.history), self._measurement_gpu_bytes()))
            except Exception as exc:

                self.app.call_from_thread(self.show_error, user_message(exc))

    def _measurement_gpu_bytes(self):
        """NVML's figure for the measurement process on the shown GPU (telemetry thread), or None off CUDA."""
        session = self.app.session
        nvml = session.nvml_handle()
        if self._gpu_index is None or self._pid is None or not self._on_cuda or nvml is None:
            return None
        return process_gpu_memory(nvml, self._gpu_index, self._pid)

    def on_unmount(self) -> None:
        self.workers.cancel_group(self, "telemetry")
        self._wake.set()  # the thread waits on it without a timeout

    @on(Tick)
    def _tick(self, message: Tick) -> None:
        self.last_telemetry = (message.sample, message.history)
        self.gpu_bytes = message.gpu_bytes
        if self.screen.active_tab() == "memory":
            self._show(message.sample, message.history)  # a hidden pane catches up when it is shown
        self._read_allocator()

    def on_shown(self) -> None:
        if self.last_telemetry is not None:
            self._show(*self.last_telemetry)

    def redraw(self) -> None:
        """The device changed: the last sample again, for the GPU now shown."""
        if self.last_telemetry is not None and self.screen.active_tab() == "memory":
            self._show(*self.last_telemetry)

    def _show(self, sample, history) -> None:
        session = self.app.session
        sample, holder = self._with_allocator(sample)
        self.show_sample(sample, history, session.gpu_index(), run_trace=list(session.run_memory),
                         run_kind=session.run_memory_kind, releases=list(self.releases), holder=holder,
                         holder_gpu_bytes=self.gpu_bytes)

    # -- the measurement process's allocator --------------------------------------------------------------
    def _read_allocator(self) -> None:
        """Ask the measurement process for its allocator and RSS, only while nothing measures there (a run's
        own memory trace covers that time) and only one question at a time."""
        session = self.app.session
        if session.measure is None or self.jobs.busy("memory") or session.measuring():
            return
        self.jobs.start("memory", {}, "reading memory", enforce_cancel=False)

    def _with_allocator(self, sample) -> tuple[Any, str]:
        """The sample with the measurement process's allocator figures and RSS (this process holds no model),
        and the name of the process they are from. Injected test sources are shown as they are."""
        session = self.app.session
        reading = self.allocator_reading
        if session.cuda_seam is not None or self._injected or session.measurement_pid is None:
            return sample, "this process"
        holder = f"measurement process (pid {session.measurement_pid})"
        if reading is None:
            return sample, holder
        if reading.get("allocated") is None:  # RSS: the sampler follows that process already
            missing = NA(reading.get("why_none") or "not available")
            return dataclasses.replace(sample, torch_allocated_bytes=missing, torch_reserved_bytes=missing,
                                       torch_peak_bytes=missing), holder
        return dataclasses.replace(sample, torch_allocated_bytes=reading["allocated"],
                                   torch_reserved_bytes=reading["reserved"], torch_peak_bytes=reading["peak"]), holder

    @on(JobEvent)
    def _job_event(self, message: JobEvent) -> None:
        event = self.jobs.accept(message)
        if event is None:
            return
        if message.slot == "memory":
            if not isinstance(event, JobFailed):
                self.allocator_reading = event.result
        elif message.slot == "release":
            if isinstance(event, JobFailed):
                self._release_failed(event.error)
            else:
                self._released(event.result)
        elif message.slot == "memsnap":
            snapshot_answered(self.app, event)

    # -- release (key e) ----------------------------------------------------------------------------
    def release(self) -> None:
        """gc + empty_cache (malloc_trim on the CPU) in the measurement process, which holds the model and the
        caching allocator (releasing here would release nothing), and say what was freed."""
        session = self.app.session
        if not session.has("telemetry"):
            self.app.notify("telemetry is still loading", severity="warning")
            return
        kind = session.device_kind() if session.device == "auto" else session.device
        if session.cuda_seam is not None:
            self._release_with_seams(kind)  # tests: the fake GPU's allocator lives in this process
            return
        self.jobs.start("release", {"device": kind}, "releasing memory", enforce_cancel=False)

    @work(thread=True, exclusive=True, group="release", exit_on_error=False)
    def _release_with_seams(self, kind: str) -> None:
        session = self.app.session
        try:
            report = release_memory(device=kind, nvml=session.nvml_handle(), cuda=session.cuda_seam)
        except Exception as exc:
            self.app.call_from_thread(self._release_failed, user_message(exc))
            return
        self.app.call_from_thread(self._released, report)

    def _released(self, report) -> None:
        self.last_release = report
        self.releases.append((time.time(), report))
        self.app.notify(report.summary(), title="memory released", timeout=6)
        self.request_sample()  # an immediate sample, so the chart shows the drop

    def _release_failed(self, error: str) -> None:
        self.app.notify(f"release: {error}", severity="error", timeout=8)
        self.show_error(error)

    # -- CUDA memory snapshot (key n) ---------------------------------------------------------------
    def snapshot(self) -> None:
        """Record the CUDA allocator's history over a few iterations; say where the snapshot went."""
        start_snapshot(self)

    # -- drawing ------------------------------------------------------------------------------------
    def _set(self, selector: str, text: str) -> None:
        """Update a Static only when its text changes: each update costs a layout pass."""
        widget = self.query_one(selector, Static)
        if getattr(widget, "_shown_text", None) != text:
            widget._shown_text = text
            widget.update(text)

    def show_sample(self, sample, history, gpu_index: int | None, chart: bool = True, run_trace=(),
                    run_kind: str = "", releases=(), holder: str = "this process", holder_gpu_bytes=None) -> None:
        """`holder` names the process whose RSS and allocator the sample carries (the one holding the model);
        `holder_gpu_bytes` is what NVML counts for that process on the GPU (None off CUDA)."""
        title = self.query_one("#mem-title", Static)
        title.remove_class("loading")
        bar = self.query_one("#mem-bar", UsageBar)
        gpu = None
        if gpu_index is not None:
            gpu = next((g for g in sample.gpus if g.index == gpu_index), None)
        if gpu is not None:
            used, total = gpu.mem_used_bytes, gpu.mem_total_bytes
            self._set("#mem-title", f"[b]GPU {gpu.index} memory (NVML)[/]: {format_bytes(used)} used of {format_bytes(total)}")
            self._set("#mem-device", 
                f"util {format_number(gpu.util_gpu_pct, '%')} · mem util {format_number(gpu.util_mem_pct, '%')} · "
                f"temp {format_number(gpu.temperature_c, '°C')} · power {format_number(gpu.power_w, 'W', 0)} · "
                f"SM clock {format_number(gpu.sm_clock_mhz, 'MHz')}")
        else:
            used, total = sample.system_ram_used_bytes, sample.system_ram_total_bytes
            self._set("#mem-title", f"[b]System RAM[/]: {format_bytes(used)} used of {format_bytes(total)}")
            self._set("#mem-device", 
                f"{holder} RSS {format_bytes(sample.process_rss_bytes)}")
        if is_number(used) and is_number(total) and total > 0:
            if (bar.total, bar.progress) != (total, used):
                bar.update(total=total, progress=used)
        elif bar.total != 1:
            bar.update(total=1, progress=0)
        alloc, reserved, peak = (sample.torch_allocated_bytes, sample.torch_reserved_bytes,
                                 sample.torch_peak_bytes)
        if is_number(alloc) and is_number(reserved):
            gap = reserved - alloc
            text = (f"torch allocator ({holder}): allocated {format_bytes(alloc)} · reserved {format_bytes(reserved)}"
                    f" · peak {format_bytes(peak)}\n  reserved but not used by tensors: [b]{format_bytes(gap)}[/]")
            if holder_gpu_bytes is not None:
                text += "\n" + process_gpu_text(holder_gpu_bytes, reserved)
            self._set("#mem-allocator", text)
        else:
            self._set("#mem-allocator", f"torch CUDA allocator: {alloc}")
        if chart:
            self.update_chart(history, gpu.index if gpu is not None else None, run_trace, run_kind, releases)

    def update_chart(self, history, gpu_index: int | None, run_trace=(), run_kind: str = "", releases=()) -> None:
        points, label = memory_series(history, gpu_index)
        extra, marks = [], []
        if points:
            now = history[-1].timestamp
            extra = run_series(run_trace, run_kind, now, points[0][0])
            marks = release_marks(releases, now)
        self.query_one(MemoryChart).show_points(points, label, extra, marks)

    def show_error(self, text: str) -> None:
        self._set("#mem-title", f"[b $error]error:[/] {text}")
