"""The Memory tab's chart: memory over time (GiB against seconds ago), the run's per-iteration trace over it, and
the releases marked on it. The pane (memory_pane.py) works out the series; this widget draws them."""

from __future__ import annotations

from torchperf_tui.app.widgets.timing.histogram import PlotHolder, theme_palette


class MemoryChart(PlotHolder):
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
        xs_all, top, legend = [], 0.1, []
        for i, (name, series) in enumerate(self.series):
            step = max(1, len(series) // self.max_points)
            points = series[::-1][::step][::-1]  # thin from the old end, keep the newest point
            xs = [p[0] for p in points]
            ys = [p[1] for p in points]
            xs_all += xs
            top = max(top, max(ys) * 1.15)
            legend.append((name, palette[i % len(palette)]))
            plot.plot(xs, ys, line_style=legend[-1][1], hires_mode=HiResMode.BRAILLE,
                      label=name if len(self.series) > 1 or self.marks else None)
        left = min(xs_all)
        for x, text in self.marks:
            if x >= left:
                plot.add_v_line(x, line_style=palette[-1], label=text)
                if (text, palette[-1]) not in legend:
                    legend.append((text, palette[-1]))
        plot.set_xlimits(left, 0)
        plot.set_ylimits(0, top)
        self.set_labels(plot, "seconds ago", "GiB")
        self.fit_xticks(plot, left, 0)
        if len(self.series) > 1 or self.marks:
            self.show_legend(plot, LegendLocation.TOPLEFT, legend)
