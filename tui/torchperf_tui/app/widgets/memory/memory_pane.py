"""Memory pane: live NVML memory (bar and time-series chart), utilisation, temperature and power,
beside the torch allocator's allocated / reserved / peak for this process; on a CPU box the
process RSS and system RAM. `e` releases memory through the engine."""

from __future__ import annotations

from rich.style import Style
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.reactive import reactive
from textual.renderables.bar import Bar as BarRenderable
from textual.widget import Widget
from textual.widgets import Static

from torchperf_tui.formatting import format_bytes, format_number
from torchperf_tui.app.widgets.timing.histogram import _PlotHolder, theme_palette

GIB = 1024 ** 3


def _num(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


class MemoryChart(_PlotHolder):
    """Memory over time (GiB against seconds ago): the sampler's curve, the latest run's per-iteration
    trace over it, and a vertical mark at each release with what it freed."""

    empty_text = "collecting samples…"
    # The chart is the costliest thing drawn at idle: every 2 s keeps the idle app under 3 % of a core
    # (1 s measured 3.6 % at 2 Hz telemetry); the samples themselves still arrive at the telemetry rate.
    min_redraw_interval = 2.0
    max_points = 240  # more points than braille columns only costs time

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.series: list[tuple[str, list[tuple[float, float]]]] = []
        self.marks: list[tuple[float, str]] = []
        self.label = ""

    @property
    def points(self) -> list[tuple[float, float]]:
        """The main curve (NVML used, or RSS)."""
        return self.series[0][1] if self.series else []

    def show_points(self, points: list[tuple[float, float]], label: str,
                    extra: list[tuple[str, list[tuple[float, float]]]] | None = None,
                    marks: list[tuple[float, str]] | None = None) -> None:
        self.series = [(label, points), *[(name, pts) for name, pts in (extra or []) if len(pts) >= 2]]
        self.marks = list(marks or [])
        self.label = label
        self.request_redraw()

    def has_data(self) -> bool:
        return len(self.points) >= 2  # a line needs two points

    def draw(self, plot) -> None:
        from textual_plot import HiResMode, LegendLocation

        palette = theme_palette(self.app)
        xs_all, top = [], 0.1
        for i, (name, series) in enumerate(self.series):
            step = max(1, len(series) // self.max_points)
            points = series[::-1][::step][::-1]  # thin from the old end, keep the newest point
            xs = [p[0] for p in points]
            ys = [p[1] for p in points]
            xs_all += xs
            top = max(top, max(ys) * 1.15)
            plot.plot(xs, ys, line_style=palette[i % len(palette)], hires_mode=HiResMode.BRAILLE,
                      label=name if len(self.series) > 1 or self.marks else None)
        left = min(xs_all)
        for x, text in self.marks:
            if x >= left:
                plot.add_v_line(x, line_style=palette[-1], label=text)
        plot.set_xlimits(left, 0)
        plot.set_ylimits(0, top)
        plot.set_xlabel("seconds ago")
        plot.set_ylabel("GiB")
        if len(self.series) > 1 or self.marks:
            plot.show_legend(LegendLocation.TOPLEFT)


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
        if _num(value):
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
    if not _num(used):
        return f"  the process on the GPU (NVML): {used}"
    outside = used - reserved
    return (f"  the process on the GPU (NVML): {format_bytes(used)} · outside the caching allocator: "
            f"[b]{format_bytes(max(outside, 0))}[/] (the CUDA context and non-PyTorch allocations)")


class UsageBar(Widget):
    """`progress` of `total` as a bar and a percentage. The fill is worked out from the width the bar has
    when it is drawn (Textual's ProgressBar rounds it to the width it had when the value was set, which for a
    tab just shown is not yet its final one)."""

    COMPONENT_CLASSES = {"usage-bar--bar"}
    DEFAULT_CSS = """
    UsageBar { height: 1; }
    UsageBar > .usage-bar--bar { color: $primary; background: $surface; }
    """
    total: reactive[float] = reactive(1.0)
    progress: reactive[float] = reactive(0.0)

    def update(self, *, total: float, progress: float) -> None:
        self.total, self.progress = total, progress

    def render(self) -> Text:
        fraction = min(max(self.progress / self.total, 0.0), 1.0) if self.total > 0 else 0.0
        label = f"{fraction * 100:.0f}%"
        width = max(self.size.width - len(label) - 1, 1)
        style = self.get_component_rich_style("usage-bar--bar")
        bar = BarRenderable(highlight_range=(0, width * fraction), width=width,
                            highlight_style=Style.from_color(style.color),
                            background_style=Style.from_color(style.bgcolor))
        text = Text()
        for segment in self.app.console.render(bar, self.app.console.options.update_width(width)):
            text.append(segment.text, segment.style)
        text.append(" " + label)
        return text


class MemoryPane(Vertical):
    """Fed a TelemetrySample every tick by the app."""

    DEFAULT_CSS = """
    MemoryPane { height: 1fr; }
    MemoryPane > Static { height: auto; }
    """

    def compose(self) -> ComposeResult:
        yield Static("loading…", id="mem-title", classes="loading")
        yield UsageBar(id="mem-bar")
        yield Static("", id="mem-device")
        yield Static("", id="mem-allocator")
        yield MemoryChart(id="mem-chart")
        yield Static("e: release memory (gc + empty_cache / malloc_trim)", id="mem-hint", classes="dim-note")

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
        if _num(used) and _num(total) and total > 0:
            if (bar.total, bar.progress) != (total, used):
                bar.update(total=total, progress=used)
        elif bar.total != 1:
            bar.update(total=1, progress=0)
        alloc, reserved, peak = (sample.torch_allocated_bytes, sample.torch_reserved_bytes,
                                 sample.torch_peak_bytes)
        if _num(alloc) and _num(reserved):
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
