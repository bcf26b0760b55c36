"""A usage bar: `progress` of `total` as a bar and a percentage (the Memory tab's used memory)."""

from __future__ import annotations

from rich.style import Style
from rich.text import Text
from textual.reactive import reactive
from textual.renderables.bar import Bar as BarRenderable
from textual.widget import Widget


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
