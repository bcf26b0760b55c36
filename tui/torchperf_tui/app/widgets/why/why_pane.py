"""Why pane: what costs the chosen set-up its time (key y), findings ranked by the time at stake per pass, each with
its evidence and fix, the top three fixes measured as A/Bs (engine/analysis/advisor.py in the measurement process;
its words are wording/advice.py's, as the CLI's)."""

from __future__ import annotations

from rich.markup import escape
from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.reactive import reactive
from textual.widgets import Button, Static

from torchperf_tui.app.messages import JobEvent
from torchperf_tui.app.pane_jobs import PaneJobs
from torchperf_tui.app.runs import save_run
from torchperf_tui.measure.protocol import Progress
from torchperf_tui.wording.advice import advice_lines, advice_title, change_line

VERIFY = 3  # the app measures the top three fixes
IDLE = "y: what costs this set-up its time, ranked, the top three fixes measured as A/Bs (up to 2 minutes)"


class WhyPane(Vertical):
    """Owns the `why` job (key y) and its last result."""

    status: reactive[str] = reactive("", init=False, always_update=True)

    DEFAULT_CSS = """
    WhyPane { height: 1fr; }
    WhyPane > Horizontal > Static { height: auto; }
    WhyPane > VerticalScroll { height: 1fr; }
    """

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.result = None  # the last result shown; the one before it is what the next one is said against
        self.jobs = PaneJobs(self)

    def compose(self) -> ComposeResult:
        with Horizontal(classes="pane-actions"):
            yield Button("Why (y)", id="why-start", compact=True, action="app.pane('why', 'start')")
            yield Static(f"pick a model, then {IDLE}", id="why-status")
        with VerticalScroll(id="why-scroll"):
            yield Static("", id="why-findings")

    def start(self) -> None:
        """Gather the evidence for the chosen set-up and measure the top fixes (replacing any measurement)."""
        selection = self.screen.ready_selection("why", module="advice_result")
        if selection is None:
            return
        self.screen.show_tab("why")
        self.status = f"[b]{escape(selection.model)}[/] · finding why it takes its time…"
        cfg = self.jobs.config(selection, self._failed, slot="why")
        if cfg is None:
            return
        self.jobs.start("why", {"cfg": cfg, "options": {"verify": VERIFY}},
                        f"finding why {selection.model} takes its time")

    @on(JobEvent)
    def _job_event(self, message: JobEvent) -> None:
        event = self.jobs.answer(message, self._failed)
        if event is None:
            return
        if isinstance(event, Progress):
            if event.what == "note":  # which measurement runs now
                self.status = f"{escape(str(event.data))}…"
            return
        self.show_result(event.result)
        if not event.result.cancelled:  # kept: History compares two, which findings appeared or went away
            save_run(self, event.result, event.extra.get("fingerprint"))

    def _failed(self, error: str) -> None:
        self.status = f"[b $error]error:[/] {escape(error)}"
        self.app.notify(error, title="why failed", severity="error", timeout=8)

    def model_chosen(self, model: str) -> None:
        if self.result is None:
            self.status = f"[b]{escape(model)}[/] · {IDLE}"

    def watch_status(self, text: str) -> None:
        self.query_one("#why-status", Static).update(text)

    def show_result(self, result) -> None:
        """The result's lines; after an earlier whole result here, first which findings appeared and went away since
        (a fix applied, then y again: its finding went away)."""
        previous, self.result = self.result, result
        lines = advice_lines(result)
        if previous is not None and not previous.cancelled and not result.cancelled:
            lines = [change_line(previous, result), *lines]
        self.status = escape(advice_title(result))
        self.query_one("#why-findings", Static).update(escape("\n".join(lines)))
