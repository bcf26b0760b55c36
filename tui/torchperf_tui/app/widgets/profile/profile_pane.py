"""Profile pane: torch.profiler's top operators over a few iterations, sortable by any timed column, and
where the Chrome trace was written."""

from __future__ import annotations

from typing import Callable

from textual import on
from textual.app import ComposeResult
from textual.reactive import reactive
from textual.containers import Horizontal, Vertical
from textual.widgets import Button, DataTable, Static

from torchperf_tui.app.pane_jobs import PaneJobs
from torchperf_tui.app.messages import JobEvent
from torchperf_tui.core.formatting import format_ms, format_shape
from torchperf_tui.wording.profile import share_text, trace_text
from torchperf_tui.engine.analysis.profiling import sort_ops

TOP_OPS = 30
# Table column -> the engine's sort key (profiling.SORT_KEYS); share and shapes follow self time.
COLUMNS = (("name", "operator", "name"), ("calls", "calls", "calls"), ("self_cpu", "self CPU", "self_cpu"),
           ("self_device", "self device", "self_device"), ("share", "share %", None), ("shapes", "shapes", None))


class ProfilePane(Vertical):
    """Owns the profile (key p); `sort_by` re-sorts the kept result with the engine's sort_ops."""

    status: reactive[str] = reactive("", init=False, always_update=True)  # the line beside the pane's button
    sort_key: reactive[str | None] = reactive(None, init=False, always_update=True)  # SORT_KEYS; None: as profiled

    DEFAULT_CSS = """
    ProfilePane { height: 1fr; }
    ProfilePane > Static { height: auto; }
    ProfilePane > DataTable { height: 1fr; }
    """

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.result = None
        self._sort_ops: Callable | None = None
        self.jobs = PaneJobs(self)

    def compose(self) -> ComposeResult:
        with Horizontal(classes="pane-actions"):
            yield Button("Profile (p)", id="profile-start", compact=True,
                         action="app.pane('profile', 'start')")
            yield Static("pick a model, then p: the top operators over a few iterations", id="profile-status")
        yield Static("", id="profile-trace")
        yield DataTable(id="profile-table", cursor_type="row", zebra_stripes=True)

    def on_mount(self) -> None:
        if not self.query(DataTable):
            return  # the app is closing as the pane mounts: its children are already gone
        table = self.query_one(DataTable)
        for key, label, _ in COLUMNS:
            table.add_column(label, key=key)

    def start(self) -> None:
        """Profile a few iterations of the chosen model (replacing a profile or any measurement in flight)."""
        selection = self.screen.ready_selection("profiler", module="profiling")
        if selection is None:
            return
        session = self.app.session
        self.screen.show_tab("profile")
        self.status = (f"[b]{selection.model}[/] on {session.resolved_device()} · profiling "
                         f"{session.profile_iters} iterations, {selection.step_text()}…")
        cfg = self.jobs.config(selection, self._failed, slot="profile")
        if cfg is None:
            return
        self.jobs.start("profile", {"cfg": cfg, "iters": session.profile_iters},
                        f"profiling {selection.model}")

    @on(JobEvent)
    def _job_event(self, message: JobEvent) -> None:
        event = self.jobs.answer(message, self._failed)
        if event is None:
            return
        result = event.result
        self.show_result(result, sort_ops)
        if result.trace_path:
            self.app.notify(f"Chrome trace saved to {result.trace_path}", title="profile", timeout=8)

    def _failed(self, error: str) -> None:
        self.show_error(error)
        self.app.notify(error, title="profile failed", severity="error", timeout=8)

    def sortable_keys(self) -> list[str]:
        """The sort keys of the columns shown, without the device ones when no device time was recorded (on
        the CPU they are all "–")."""
        keys = [key for _, _, key in COLUMNS if key is not None]
        if self.result is not None and not self.result.total_self_device_ms:
            keys = [key for key in keys if "device" not in key]
        return keys

    def cycle_sort(self) -> None:
        """Sort the operators by the next column that can tell them apart."""
        if self.result is None or self._sort_ops is None:
            return
        keys = self.sortable_keys()
        current = self.sort_key if self.sort_key in keys else keys[-1]
        self.sort_by(keys[(keys.index(current) + 1) % len(keys)])

    def model_chosen(self, model: str) -> None:
        """The status line names the chosen model until this pane's first job (it said "pick a model")."""
        if self.status == "":
            self.status = f"[b]{model}[/] · p: the top operators over a few iterations"

    def watch_status(self, text: str) -> None:
        self.query_one("#profile-status", Static).update(text)

    def show_error(self, text: str) -> None:
        self.status = f"[b $error]error:[/] {text}"

    def show_result(self, result, sort_ops: Callable) -> None:
        self.result = result
        self._sort_ops = sort_ops
        self.sort_key = result.sort_by or None
        self.query_one("#profile-trace", Static).update(trace_text(result.trace_path, compact=True))

    def sort_by(self, key: str) -> None:
        if self.result is not None and self._sort_ops is not None:
            self.sort_key = key

    def watch_sort_key(self) -> None:
        if self.result is not None:
            self._fill()

    def on_data_table_header_selected(self, event: DataTable.HeaderSelected) -> None:
        """Pressing a column header sorts by it (share % sorts by the self time it is a share of)."""
        event.stop()
        if self.result is None:
            return
        key = dict((k, s) for k, _, s in COLUMNS).get(event.column_key.value)
        if key is None and event.column_key.value == "share":
            key = "self_device" if self.result.total_self_device_ms > 0 else "self_cpu"
        if key is None:
            self.app.notify("the shapes column is not sortable", timeout=2)
            return
        self.sort_by(key)

    def _fill(self) -> None:
        result = self.result
        table = self.query_one(DataTable)
        table.clear()
        ops = self._sort_ops(result.ops, self.sort_key) if self.sort_key else list(result.ops)
        for i, op in enumerate(ops[:TOP_OPS]):
            device = format_ms(op.self_device_ms) if op.self_device_ms else "–"
            table.add_row(op.name, str(op.calls), format_ms(op.self_cpu_ms), device,
                          share_text(result, op), op.input_shapes or "–", key=str(i))
        cancelled = " · cancelled" if result.cancelled else ""
        self.status = (
            f"[b]{result.model}[/] {format_shape(result.input_shape)} {result.dtype} on {result.device} · "
            f"{result.iters} iterations, {result.step}{cancelled} · {len(result.ops)} ops · by [b]{self.sort_key or 'self time'}[/] "
            "(o or a header: sort)")
