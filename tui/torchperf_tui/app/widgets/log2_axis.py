"""An x axis in log2 for a plot of values that grow by doubling or more a step (sequence lengths, message sizes):
textual-plot has no log axis, so a plot places each value at log2(value) and this gives the ticks there, at the values
measured, each labelled with its value in the plot's own words."""

from __future__ import annotations

import math
from typing import Callable


class Log2Axis:
    """x ticks at `values`, placed by log2 (each doubling one step), at most about `most` of them (every other
    value, or fewer, where they would crowd), each labelled `label(value)`. `ticks` go to set_xticks, `formatter` to
    set_x_formatter; `limits(pad)` the x range with the outer ticks clear of the edges."""

    def __init__(self, values: list[int], most: int, label: Callable[[int], str] = str) -> None:
        # textual-plot (and numpy): loaded with the plot, after the first frame
        from textual_plot.axis_formatter import AxisFormatter

        values = sorted(set(values))
        step = max(1, math.ceil(len(values) / max(1, most)))
        self.values = values
        ticks = [math.log2(n) for n in values[::step]]

        class _Formatter(AxisFormatter):
            def get_ticks(self, min_, max_, max_ticks=8):
                return [t for t in ticks if min_ - 1e-9 <= t <= max_ + 1e-9]

            def get_labels_for_ticks(self, shown):
                return [label(round(2 ** t)) for t in shown]

        self.ticks, self.formatter = ticks, _Formatter()

    def limits(self, least_pad: float = 0.25) -> tuple[float, float]:
        """The x range: the values' log2 span, padded by a twentieth of it or `least_pad`, whichever is more."""
        lo, hi = math.log2(self.values[0]), math.log2(self.values[-1])
        pad = max(least_pad, (hi - lo) * 0.05)
        return lo - pad, hi + pad
