"""Kernels pane: for each conv layer, what ran under flag set A (before the last flip) and under B (now),
with its time per iteration; the layers whose choice changed are marked. On the CPU the engine shows the
ATen convolution implementation and says that kernel choice is a GPU view. Below the conv layers, each attention
call site (SDPA): the kernel it ran under A and B (flash, efficient, cuDNN, math), and under the table each fallback
with its reason ("B: flash allowed, math ran at model.layers.0.self_attn: dropout")."""

from __future__ import annotations

from rich.markup import escape
from textual import on
from textual.app import ComposeResult
from textual.reactive import reactive
from textual.containers import Horizontal, Vertical
from textual.widgets import Button, DataTable, Static

from torchperf_tui.app.pane_jobs import PaneJobs
from torchperf_tui.app.widgets.fitted_table import FittedTable
from torchperf_tui.app.messages import JobEvent
from torchperf_tui.core.formatting import fit_name, format_shape
from torchperf_tui.engine.measurements.ab_arms import ArmSpec
from torchperf_tui.wording.conditions import disturbed_text
from torchperf_tui.wording.kernels import (arm_us_text, attention_ran_text, disturbed_arms, fallback_lines,
                                           kernels_marks_text, kernels_summary, layer_rows, ran_text, shows_step)
from torchperf_tui.core.marks import disturbance_marks

# The numbers and whether the choice changed come first, so they fit at 80 columns; the names follow. A
# training step's comparison has a row per pass of each layer (fwd, dgrad, wgrad, bwd) and says which.
COLUMNS = (("layer", "layer"), ("a_us", "A µs"), ("b_us", "B µs"), ("changed", "choice"), ("a", "A ran"),
           ("b", "B ran"))
PASS_COLUMN = ("pass", "pass")
# Where A ran and B ran do not both fit beside the rest, they are stacked: a row of two lines per layer (and pass),
# A above B, the kernels in one column and their times in another, the pass and the choice under the layer's name.
STACKED_COLUMNS = (("layer", "layer"), ("us", "µs"), ("ran", "A ran / B ran"))
MIN_NAME = 10
NAME_WIDTH = 26  # a kernel's short name side by side (wording.kernel_names.short_kernel_names)
STACKED_LAYER = (8, 16)  # the least and the most a stacked layer's name takes: the kernels' names keep the rest


def columns_for(training: bool, stacked: bool = False) -> tuple[tuple[str, str], ...]:
    if stacked:
        return STACKED_COLUMNS
    return (COLUMNS[0], PASS_COLUMN, *COLUMNS[1:]) if training else COLUMNS


def kernel_rows(result, names_width: int) -> list[dict]:
    """A row per conv layer (per pass of a training step's), its kernels by their short names in `names_width`,
    then a row per attention call site (per pass): the facts the table lays out side by side or stacked."""
    rows = []
    disturbed = disturbed_arms(result)
    for layer, name, phase, part, names in layer_rows(result, names_width):
        rows.append({"name": name, "phase": phase, "a_us": arm_us_text(part.a_us, "A", disturbed),
                     "b_us": arm_us_text(part.b_us, "B", disturbed),
                     "changed": part.changed, "choice": "changed" if part.changed else "same",
                     "a": ran_text(part.a, names, compact=True),
                     "b": ran_text(part.b, names, compact=True) if part.changed else "same",
                     "key": f"{layer.layer}:{phase}"})
    for index, site in enumerate(getattr(result, "attention", [])):
        # An attention row's choice says the kernels themselves ('math→flash'), in sight at 80 columns.
        first = index == 0 or result.attention[index - 1].site != site.site
        a_ran, b_ran = attention_ran_text(site.a, compact=True), attention_ran_text(site.b, compact=True)
        rows.append({"name": site.site if first or not result.training else "", "phase": site.phase,
                     "a_us": arm_us_text(site.a.us_per_iter, "A", disturbed),
                     "b_us": arm_us_text(site.b.us_per_iter, "B", disturbed),
                     "changed": site.changed, "choice": f"{a_ran}→{b_ran}" if site.changed else a_ran,
                     "a": a_ran, "b": b_ran, "key": f"attention:{site.site}:{site.phase}"})
    return rows


def widest(rows: list[dict], field: str, label: str = "") -> int:
    """The width of a column holding `field` of every row under `label`."""
    return max([len(label)] + [len(row[field]) for row in rows])


def stacked_choice(row: dict) -> str:
    """What a stacked row says under the layer's name: 'changed' or 'same', for an attention site too (its kernels
    are in the column beside: 'math' under a site's name would read as a layer's)."""
    return "changed" if row["changed"] else "same"


def choice_cell(row: dict, stacked: bool = False) -> str:
    """'changed' (or, side by side, an attention site's 'math→flash') in bold warning, or 'same' (an unchanged
    attention site's kernel side by side)."""
    text = stacked_choice(row) if stacked else row["choice"]
    return f"[b $warning]{text}[/]" if row["changed"] else text


class KernelsPane(Vertical):
    """Owns the kernel profile (key k): an engine.analysis.kernels.KernelComparison of A (the flags before the last
    flip) and B (the flags now)."""

    status: reactive[str] = reactive("", init=False, always_update=True)  # the line beside the pane's button
    result = reactive(None, init=False)  # the latest engine.analysis.kernels.KernelComparison

    # The table keeps its header and two layers (stacked, two lines each) however long the lines around it wrap
    # at 80 columns beside the sidebar; the pane scrolls to what does not fit.
    DEFAULT_CSS = """
    KernelsPane { height: 1fr; overflow-y: auto; }
    KernelsPane > Static { height: auto; }
    KernelsPane > DataTable { height: 1fr; min-height: 6; }
    """

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.jobs = PaneJobs(self)

    def compose(self) -> ComposeResult:
        with Horizontal(classes="pane-actions"):
            yield Button("Kernels (k)", id="kernels-start", compact=True, action="app.kernels")
            yield Static("flip a flag, then k: what each conv layer and attention call ran before (A) and after (B)",
                         id="kernels-status")
        yield Static("", id="kernels-summary")
        yield FittedTable(id="kernels-table", cursor_type="row", zebra_stripes=True)
        yield Static("", id="kernels-note", classes="dim-note")

    def on_mount(self) -> None:
        if not self.query(DataTable):
            return  # the app is closing as the pane mounts: its children are already gone
        self.query_one(FittedTable).fill(columns_for(False), [])

    def _fill_table(self, result) -> None:
        """A row per conv layer (per pass of a training step's), then per attention call site: A ran and B ran side
        by side where both fit at their names' natural width beside the rest, else stacked. The layer's name gets
        what the other columns leave, keeping its end: the times, the choice and both kernels stay in sight at 80
        columns, beside the sidebar too."""
        training = result.training
        table = self.query_one(DataTable)
        rows = kernel_rows(result, NAME_WIDTH)
        pass_width = widest(rows, "phase", "pass") + 2 if training else 0
        beside = pass_width + sum(widest(rows, field, label) + 2 for field, label in
                                  (("a_us", "A µs"), ("b_us", "B µs"), ("choice", "choice"), ("a", "A ran"),
                                   ("b", "B ran")))
        width = table.columns_width(len(rows), laid_out=self.scrollable_content_region.width) - beside - 2
        if width >= MIN_NAME:
            table.fill(columns_for(training), [[fit_name(row["name"], width), *([row["phase"]] if training else []),
                                                 row["a_us"], row["b_us"], choice_cell(row), row["a"], row["b"]]
                                                for row in rows], keys=[row["key"] for row in rows])
            return
        # Stacked: the layer's name takes what the kernels' names leave it, between STACKED_LAYER's bounds.
        for row in rows:
            row["under"] = f"{row['phase']} · {stacked_choice(row)}" if training else stacked_choice(row)
        times = max(widest(rows, "a_us"), widest(rows, "b_us")) + len("A ") + 2
        # the name's and the kernels' columns, less their padding
        room = table.columns_width(2 * len(rows), laid_out=self.scrollable_content_region.width) - times - 4
        least, most = STACKED_LAYER
        name_width = max(least, widest(rows, "under"),  # the pass and the choice whole, the name cut to fit
                         min(room - max(widest(rows, "a"), widest(rows, "b")), most, widest(rows, "name", "layer")))
        ran_width = max(MIN_NAME, room - name_width)
        rows = kernel_rows(result, min(ran_width, NAME_WIDTH))
        over = max(widest(rows, "a"), widest(rows, "b")) - ran_width  # a name and its ' +2' (kernels more)
        if over > 0:
            rows = kernel_rows(result, max(MIN_NAME, min(ran_width, NAME_WIDTH) - over))
        cells = []
        for row in rows:
            choice = choice_cell(row, stacked=True)
            under = f"{row['phase']} · {choice}" if training else choice
            cells.append([f"{fit_name(row['name'], name_width)}\n{under}", f"A {row['a_us']}\nB {row['b_us']}",
                          f"{row['a']}\n{row['b']}"])
        table.fill(columns_for(training, stacked=True), cells, keys=[row["key"] for row in rows], height=2)

    def start(self, flags_a, flags_b) -> None:
        """Profile each conv layer under A and under B (replacing a profile or any measurement in flight)."""
        selection = self.screen.ready_selection("kernel view", module="kernels")
        if selection is None:
            return
        self.screen.show_tab("kernels")
        what = "" if selection.step == "infer" and not selection.amp else f" ({selection.step_text()})"
        self.status = (f"[b]{selection.model}[/]{what} · profiling each conv layer and attention call under A: "
                       f"{self.app.session.flags_text(flags_a, beside=flags_b)} "
                       f"and B: {self.app.session.flags_text(flags_b, beside=flags_a)}…")
        base = self.jobs.config(selection, self._failed, flags=flags_a, slot="kernels")
        if base is None:
            return
        # Flag sets said on the run's device by the measurement process; the same set under both is a view, not a
        # comparison: not refused (aa).
        self.jobs.start("kernels", {"base": base, "a": ArmSpec(flags=flags_a), "b": ArmSpec(flags=flags_b),
                                               "aa": True}, f"profiling the conv kernels of {selection.model}")

    @on(JobEvent)
    def _job_event(self, message: JobEvent) -> None:
        event = self.jobs.answer(message, self._failed)
        if event is not None:
            self.result = event.result

    def _failed(self, error: str) -> None:
        self.show_error(error)
        self.app.notify(error, title="kernels failed", severity="error", timeout=8)

    def model_chosen(self, model: str) -> None:
        """The status line names the chosen model until this pane's first job (it said "pick a model")."""
        if self.status == "":
            self.status = f"[b]{model}[/] · k: flip a flag first: what each conv layer and attention call ran before " \
                          "(A) and after (B)"

    def watch_status(self, text: str) -> None:
        self.query_one("#kernels-status", Static).update(text)

    def show_error(self, text: str) -> None:
        self.status = f"[b $error]error:[/] {text}"

    @on(FittedTable.WidthChanged)
    def _refit(self) -> None:
        if self.result is not None:
            self._fill_table(self.result)

    def watch_result(self, result) -> None:
        self._fill_table(result)
        shape = format_shape(result.input_shape)
        state = " · cancelled" if result.cancelled else ""
        step = f" · {result.step}" if shows_step(result) else ""
        self.status = (f"[b]{result.model}[/] · {shape}{step} on {result.device} · A: {result.a_spec} · "
                       f"B: {result.b_spec}{state}")
        # An arm's disturbed times are marked in the table; the marks' heads are said above it, in sight at 80x24,
        # and whole under it.
        above = kernels_marks_text(result, compact=True)
        summary = self.query_one("#kernels-summary", Static)
        summary.update(escape(kernels_summary(result)) + (f"\n[$warning]{escape(above)}[/]" if above else ""))
        fallbacks = "\n".join(f"[$warning]{escape(line)}[/]" for line in fallback_lines(result))
        marks = disturbed_text(disturbance_marks(result))
        self.query_one("#kernels-note", Static).update("\n".join(filter(None, [
            fallbacks, escape(result.note), f"[$warning]{escape(marks)}[/]" if marks else ""])))
