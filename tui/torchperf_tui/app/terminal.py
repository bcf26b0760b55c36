"""What the app does about the terminal it runs in, where Textual's own handling falls short."""

from __future__ import annotations

from rich.segment import Segment
from textual import filter as textual_filter
from textual.app import App
from textual.color import Color


class Monochrome(textual_filter.Monochrome):
    """Textual's NO_COLOR filter, but a segment without a style passes through as it is. Textual's calls
    `style.color` on every segment, and an empty canvas (textual-plot's margins, before a plot has data) draws
    a blank strip with no style: with NO_COLOR set, the first run or the Memory tab ended in a traceback."""

    def apply(self, segments: list[Segment], background: Color) -> list[Segment]:
        monochrome_style = textual_filter.monochrome_style
        return [Segment(text, None if style is None else monochrome_style(style), None)
                for text, style, _ in segments]


def fix_filters(app: App) -> None:
    """Swap the filters Textual chose from the environment (at App init) for the ones above."""
    app._filters = [Monochrome() if type(line_filter) is textual_filter.Monochrome else line_filter
                    for line_filter in app._filters]
