"""Compare pane: the kept runs in a table (flags, median, p99, speed-up vs the baseline run) and their
latency histograms overlaid. It owns the interleaved A/B comparison (key a, or a flag flip with
"on flip: A/B"): A is the flags before the last flip, B the flags now, timed in randomised blocks with a
verdict; the arms are kept as runs beside the others."""

from __future__ import annotations

import dataclasses

import textwrap
import time

from textual import on
from textual.app import ComposeResult
from textual.reactive import reactive
from textual.containers import Vertical
from textual.markup import escape
from textual.widgets import DataTable, Static

from torchperf_tui.app.widgets.fitted_table import FittedTable, column_widths
from torchperf_tui.engine.records.history_compare import disturbed_sentence
from torchperf_tui.core.stats import compute_stats, percentile_supported
from torchperf_tui.core.formatting import COMPACT_UNSUPPORTED, format_ms, format_number, format_percentile
from torchperf_tui.wording.numerics import ab_numerics_rows
from torchperf_tui.wording.compare import arm_conditions, arm_pairs, ci_text
from torchperf_tui.wording.timing import state_rows
from torchperf_tui.app.pace import Pace
from torchperf_tui.app.pane_jobs import PaneJobs
from torchperf_tui.app.messages import JobEvent, RunsChanged
from torchperf_tui.app.setup_diff import against_text, differences, setup_text, speedup_text
from torchperf_tui.app.runs import LiveRun, app_marks, save_run
from torchperf_tui.measure.protocol import JobDone, JobFailed, Progress
from torchperf_tui.app.widgets.timing.histogram import LatencyOverlay, set_text, theme_palette
from torchperf_tui.engine.measurements.ab_arms import FLIP_REMEDY, ArmSpec, same_arms_refusal
from torchperf_tui.core.marks import disturbance_marks

AB_BLOCKS = 10
# An A/B's blocks can come several a second (a small model); each redraw lays out the table and its notes. On a
# 2-core box that took 0.6 of a core beside the A/B, which its host check then saw; the blocks are shown at most
# this often (the verdict at once).
BLOCKS_SHOWN_EVERY_S = 0.5
COMPACT_BELOW_ROWS = 30  # the pane's height under which its note takes one row
IDLE_HINT = "a: A/B, the flags before vs after the last flip"

OVERLAY_RUNS = 4
TOAST_S = 4  # a toast that repeats what the verdict line shows: at 80x24 it lies over the table


AB_OVERLAY_WAITING = "A/B: each arm's histogram fills as its blocks are timed"

# What answers "which is faster" first, so it is in sight at 80 columns beside the sidebar, then what differs: the
# setup, said against the baseline (the baseline's row says it whole). Where the columns do not all fit the table's
# width, the last ones give way from the right (the setup wrapped to what is left, its label's width at least), and
# the line under the table names them and where to see them (h, or a wider terminal), as the sweep says where its p90
# is.
COLUMNS = (("run", "run"), ("median", "median"), ("speedup", "speed-up"), ("p99", "p99"),
           ("setup", "setup vs baseline"), ("fps", "FPS at p50"), ("status", "status"))
SETUP = 4
MIN_SETUP = len(COLUMNS[SETUP][1])  # its label whole
SETUP_LINES = 3  # a setup that does not fit its column wraps, on as many lines as a row then takes


def fitted_columns(rows: list[list[str]], room: int, padding: int) -> tuple[int, int | None]:
    """How many of COLUMNS fit in `room` columns with `rows` filled in (each cell `padding` wide on both sides),
    and the width the setup's column is wrapped to where it does not fit on one line (else None)."""
    if room <= 0:  # not laid out yet (a tab being shown): all of them, fitted again once it has its width
        return len(COLUMNS), None
    widths = [width + 2 * padding for width in column_widths(COLUMNS, rows)]
    used = 0
    for n, width in enumerate(widths):
        if used + width > room:
            left = room - used - 2 * padding
            if n == SETUP and left >= MIN_SETUP:
                return n + 1, left
            return max(n, 1), None  # the run's column at least: a row needs a cell
        used += width
    return len(COLUMNS), None


def wrapped_text(text: str, width: int, lines: int = SETUP_LINES) -> str:
    """`text` wrapped to `width` on up to `lines` lines, the last one's end elided where it is longer still."""
    parts = textwrap.wrap(text, width) or [""]
    if len(parts) > lines:
        last = " ".join(parts[lines - 1:])
        parts = parts[:lines - 1] + [last[:width - 1].rstrip() + "…"]
    return "\n".join(parts)


def ab_overlaid(runs: list, ab_runs: tuple[int, int] | None) -> list | None:
    """The arms of the latest A/B (those with samples so far) while it is the newest of the kept runs, in flight or
    done: the pane's verdict line is about them, and a kept run beside them would read as one of them. None when
    the A/B is not the newest, or ended without a sample."""
    if ab_runs is None or not runs or max(r.run_id for r in runs) not in ab_runs:
        return None
    arms = [r for r in runs if r.run_id in ab_runs]
    if all(r.finished and not r.samples_ms for r in arms):
        return None
    return [r for r in arms if r.samples_ms]


def overlaid_runs(completed: list) -> list:
    """The runs whose histograms are overlaid: the last few measured like the newest (another model or input
    on the same axis would compare nothing), or only the A/B pair when the newest finished run is the B arm of
    an interleaved comparison (its verdict is about those two)."""
    if len(completed) >= 2 and completed[-1].arm == "B" and completed[-2].arm == "A":
        return completed[-2:]
    if not completed:
        return []
    newest = completed[-1]
    return [r for r in completed if not differences(r, newest)][-OVERLAY_RUNS:]


# What an arm's SPEC says for a run option set to none: its word for "as transformers/none" (ab_arms.ArmSpec).
ARM_NONE = {"quant": "off", "attn": "default", "compile": "eager"}


def arm_settings(options: dict) -> dict:
    """Run options as the selection holds them (None: none) -> as an ArmSpec takes them ('off', 'default')."""
    return {name: ARM_NONE.get(name) if value is None else value for name, value in options.items()}


class ComparePane(Vertical):
    """Runs side by side; `b` makes the highlighted run the baseline."""

    DEFAULT_CSS = """
    ComparePane { height: 1fr; }
    ComparePane > DataTable { height: auto; max-height: 10; }
    ComparePane.-compact #compare-note { text-wrap: nowrap; text-overflow: ellipsis; }
    """

    def on_resize(self, event) -> None:
        """On a short terminal the note above the table takes one row (the keys are in the help), so the
        overlay keeps room to be read; the verdict still wraps."""
        self.set_class(event.size.height < COMPACT_BELOW_ROWS, "-compact")

    verdict: reactive[str] = reactive("", init=False)  # the A/B line: what runs, then the verdict

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.jobs = PaneJobs(self)
        self.ab_runs: tuple[int, int] | None = None  # the run ids of the latest A/B's arms
        self._ab_state_notes: dict[int, list[str]] = {}  # an A/B arm's run id -> its comparison's state notes
        # The latest A/B as this process saw it: when its blocks began (monotonic s), and (monotonic s, this
        # process's CPU s) at its first block's arrival; None before that arrival.
        self._ab_seen: tuple[float, tuple[float, float]] | None = None
        self._blocks = Pace(self, self._show_blocks, BLOCKS_SHOWN_EVERY_S)
        self._block_said = ""  # the latest block's line, for the next paced redraw

    def compose(self) -> ComposeResult:
        yield Static("no runs yet: pick a model and press r", id="compare-note")
        yield Static(f"{IDLE_HINT} (interleaved, with a verdict)", id="compare-verdict")
        yield FittedTable(COLUMNS, id="compare-table", cursor_type="row", zebra_stripes=True)
        # what a '?' beside a p99 means, where one shows (a tooltip is out of reach of a keyboard over SSH; the note
        # above is cut to a line a statement on a short terminal)
        yield Static("", id="compare-legend", classes="dim-note")
        yield LatencyOverlay(id="latency-overlay")

    @on(FittedTable.WidthChanged)
    def _refit(self) -> None:
        self.refresh_runs()

    def watch_verdict(self, text: str) -> None:
        set_text(self.query_one("#compare-verdict", Static), text)

    def highlighted_run_id(self) -> int | None:
        table = self.query_one(DataTable)
        if table.row_count == 0:
            return None
        return int(table.ordered_rows[table.cursor_row].key.value)  # a row's key needs no column

    # -- the A/B comparison ------------------------------------------------------------------------
    def start_ab(self, flags_a, flags_b, b_options: dict | None = None, a_options: dict | None = None) -> None:
        """Time A against B interleaved in blocks (replacing a comparison or any measurement in flight); two
        identical arms are refused, in the verdict line (it stays) and a short toast. `b_options`, `a_options`: run
        options of an arm's own as the selection holds them ({"quant": "int8wo"}: the same flags, B quantized; a
        value of None: none), over the selection's; A's are the comparison's base."""
        a_options, b_options = dict(a_options or {}), dict(b_options or {})
        if flags_a == flags_b and a_options == b_options:
            text = same_arms_refusal(FLIP_REMEDY, self.app.session.flags_text(flags_a))
            if not self.comparing():
                self.verdict = f"A/B: {escape(text)}"
            self.app.notify(text, severity="warning", timeout=TOAST_S)
            return
        selection = self.screen.ready_selection("A/B comparison", module="abtest")
        if selection is None:
            return
        session = self.app.session
        runs = session.runs
        self._blocks.cancel()
        for record in self.arms():  # a comparison in flight is replaced: its result will be dropped
            if not record.finished:
                record.status = "cancelled"
        if "compile" not in b_options:  # the arms compile where their options say so; else both run eager
            if selection.compile != "eager":
                self.app.notify("A/B compares the flag sets eager: flip the graph select to compare compiled against "
                                "eager", severity="warning")
            selection = dataclasses.replace(selection, compile="eager")
        records = []
        for arm, flags in (("A", flags_a), ("B", flags_b)):
            chosen = dataclasses.replace(selection, **(b_options if arm == "B" else a_options))
            record = LiveRun.of(session, chosen, self.screen.default_shape(), flags=flags, arm=arm)
            runs.add(record)
            records.append(record)
        try:
            records[0].batch = records[1].batch = selection.batch_size()
        except Exception:
            pass  # the config below says what is wrong with it
        self.ab_runs = (records[0].run_id, records[1].run_id)
        self._ab_seen = None
        runs.baseline_id = records[0].run_id  # speed-ups read B against A
        self.screen.show_tab("compare")
        b_said = "".join(f" · {name} {value or 'none'}" for name, value in b_options.items())
        self.verdict = (f"A/B: [b]{records[0].flags_text}[/] vs [b]{records[1].flags_text}{escape(b_said)}[/] · "
                        f"interleaved in {AB_BLOCKS} randomised blocks per arm…")
        self.post_message(RunsChanged())
        base = self.jobs.config(dataclasses.replace(selection, **a_options), self._ab_failed, flags=flags_a, slot="ab")
        if base is None:
            return
        # The arms are flag sets, not typed SPECs: the measurement process says them on the run's device.
        self.jobs.start("ab", {"base": base, "a": ArmSpec(flags=flags_a, **arm_settings(a_options)),
                                     "b": ArmSpec(flags=flags_b, **arm_settings(b_options)),
                                     "blocks": AB_BLOCKS, "per_block": max(3, session.iters // 5),
                                     "seed": self.ab_runs[0], "remedy": FLIP_REMEDY},
                        f"comparing A/B on {selection.model}")

    def arms(self) -> list[LiveRun]:
        """The latest A/B's arms still kept (A, B)."""
        if self.ab_runs is None:
            return []
        return [r for r in map(self.app.session.runs.get, self.ab_runs) if r is not None]

    def comparing(self) -> bool:
        return self.jobs.busy("ab")

    @on(JobEvent)
    def _job_event(self, message: JobEvent) -> None:
        event = self.jobs.accept(message)
        if isinstance(event, Progress):
            self._block(*event.data)
        elif isinstance(event, JobFailed):
            self._ab_failed("cancelled" if event.cancelled else event.error)
        elif isinstance(event, JobDone):
            self._ab_finished(event.result, event.extra.get("fingerprint"))

    def _block(self, arm: str, index: int, total: int, samples) -> None:
        record = next((r for r in self.arms() if r.arm == arm), None)
        if record is None or record.finished:
            return
        if self._ab_seen is None:  # the first block: the blocks began its timed samples ago
            now = self.app.session.disturbances.now()
            self._ab_seen = (now - sum(samples) / 1000, (now, time.process_time()))
        record.samples_ms.extend(samples)
        record.stats = compute_stats(record.samples_ms, batch=record.batch)
        record.status, record.index, record.total = "timed", index, total
        self._block_said = f"A/B: block {index + 1} of {total} done ({arm}) · the verdict comes at the end"
        self._blocks.request()

    def _show_blocks(self) -> None:
        self.verdict = self._block_said
        self.post_message(RunsChanged())

    def _ab_finished(self, result, fingerprint) -> None:
        self._blocks.cancel()  # a block's line must not come after the verdict
        batch = result.input_shape[0]
        # What this process did beside the blocks (a resize, heavy redraws) goes on the result, as a timing run's
        # does (timing_pane._mark_disturbed): both arms' history records keep it with the host's noise.
        if self._ab_seen is not None and hasattr(result, "app_marks"):
            result.app_marks = app_marks(self.app.session.disturbances, *self._ab_seen, result)
        marks = disturbance_marks(result)
        for record in self.arms():
            arm_result = result.a if record.arm == "A" else result.b
            record.samples_ms = list(arm_result.samples_ms)
            record.stats = compute_stats(record.samples_ms, batch=batch)
            record.status = "cancelled" if result.cancelled else "done"
            record.verdict = result.verdict
            record.disturbed = list(marks)
            threads = getattr(arm_result, "threads_used", None)
            if threads is not None:  # as run: the table tells thread counts apart
                record.flags_text = arm_result.flags_text(result.device)
                if arm_result.flags.num_threads is None:
                    record.flags = arm_result.flags.replace(num_threads=threads)
            if getattr(result, "state_notes", None):
                self._ab_state_notes[record.run_id] = list(result.state_notes)
        self.verdict = (ab_verdict_text(result))
        if result.verdict is not None:
            # short: the verdict line above the table says it too, and a toast must not sit over the table
            self.app.notify(result.summary(), title="A/B verdict", timeout=TOAST_S)
        self.post_message(RunsChanged())
        if not result.cancelled:
            save_run(self, result, fingerprint)

    def _ab_failed(self, error: str) -> None:
        self._blocks.cancel()
        cancelled = error == "cancelled"
        for record in self.arms():
            if not record.finished:
                record.status, record.error = ("cancelled", None) if cancelled else ("failed", error)
        self.verdict = ("A/B: cancelled" if cancelled else f"A/B: [b $error]error:[/] {error}")
        if not cancelled:
            self.app.notify(error, title="compare failed", severity="error", timeout=TOAST_S)  # the line says it
        self.post_message(RunsChanged())

    # -- the kept runs -------------------------------------------------------------------------------
    def state_notes(self, record: LiveRun) -> list[str]:
        """What the model's code changed in torch's global state during the run (a timing run's result, or an
        A/B arm's comparison)."""
        return list(getattr(record.result, "state_notes", None) or self._ab_state_notes.get(record.run_id, []))

    def set_baseline(self) -> None:
        """Make the highlighted run the baseline for speed-ups."""
        run_id = self.highlighted_run_id()
        if run_id is None:
            return
        self.app.session.runs.baseline_id = run_id
        self.refresh_runs()
        self.app.notify(f"baseline is now run #{run_id}", timeout=2)

    def clear_runs(self) -> None:
        """Forget the kept runs (a run in flight continues)."""
        runs = self.app.session.runs
        unfinished = [r for r in runs if not r.finished]
        runs.clear()
        for record in unfinished:
            runs.add(record)
        if not self.comparing():  # the verdict belonged to runs that are gone
            self.verdict = f"runs cleared · {IDLE_HINT}"
        self.refresh_runs()

    def on_shown(self) -> None:
        self.refresh_runs()

    def refresh_runs(self) -> None:
        """Redraw the table and overlay, when the tab is shown (it catches up when it is)."""
        if self.is_attached and self.screen.active_tab() == "compare":
            self.show_runs(self.app.session.runs, theme_palette(self.app))

    def show_runs(self, history, palette: list[str]) -> None:
        table = self.query_one(FittedTable)
        keep = self.highlighted_run_id()
        base = history.baseline()
        arms = ab_overlaid(list(history), self.ab_runs)
        overlaid = arms if arms is not None else overlaid_runs(history.completed())
        colour = {r.run_id: palette[i % len(palette)] for i, r in enumerate(overlaid)}
        kind = self.app.session.device_kind()
        rows, setups = [], []
        for record in history:
            s = record.stats
            label = record.label
            if record.run_id in colour:
                label = f"[{colour[record.run_id]}]■[/] {label}"
            if base is None or record is base:
                setup = setup_text(record)
            else:
                setup = against_text(record, base, kind)
            changed = [r.label for r in ((record,) if base is None or record is base else (record, base))
                       if self.state_notes(r)]
            if changed:  # the flags asked may match; the state the runs ran under did not
                setup = (setup.replace("same flags", "same flags asked") +
                         f" · torch state changed by the model's code in {' and '.join(changed)}")
            rows.append([label, format_ms(s.p50_ms) if s else "–",
                         speedup_text(record, base) if base is not None else "–",
                         format_percentile(s.p99_ms, 0.99, s.n) if s else "–", escape(setup),
                         format_number(s.fps_at_median, digits=1) if s else "–",
                         record.status + (", disturbed" if record.disturbed else "")])
            setups.append(setup)
        shown, setup_width = fitted_columns(
            rows, table.columns_width(len(rows), laid_out=self.scrollable_content_region.width), table.cell_padding)
        height = 1
        if setup_width is not None:
            setups = [wrapped_text(setup, setup_width) for setup in setups]
            height = max(setup.count("\n") + 1 for setup in setups)
            rows = [[*row[:SETUP], escape(setup), *row[SETUP + 1:]] for row, setup in zip(rows, setups)]
        table.fill(COLUMNS[:shown], [row[:shown] for row in rows], keys=[str(record.run_id) for record in history],
                   height=height)
        cut = any(setup.endswith("…") for setup in setups) if setup_width is not None else False
        hidden = [label for _, label in COLUMNS[shown:]] + (["the setup whole"] if cut else [])
        where = "h hides the sidebar" if self.screen.sidebar_shown() else "a wider terminal shows them"
        if keep is not None and history.get(keep) is not None:
            table.move_cursor(row=table.get_row_index(str(keep)))
        marked = any(r.stats is not None and not percentile_supported(0.99, r.stats.n) for r in history)
        note = self.query_one("#compare-note", Static)
        if len(history) == 0:
            set_text(note, "no runs yet: pick a model and press r")
        else:
            head = f"baseline {base.label}: {setup_text(base)} · " if base is not None else ""
            set_text(note, f"{head}speed-up = baseline median / run median, like for like only · b: make the "
                        "highlighted run the baseline" + disturbed_note(list(history)))
        legend = self.query_one("#compare-legend", Static)
        lines = [COMPACT_UNSUPPORTED] if marked else []  # whole in the Help
        lines += [f"{', '.join(hidden)}: {where}"] if hidden and len(history) else []
        set_text(legend, "\n".join(lines))
        legend.display = bool(lines)
        self.query_one(LatencyOverlay).show_runs(
            [(f"{r.label} {r.flags_text if base is None or r is base else against_text(r, base, kind)}",
              r.samples_ms) for r in overlaid],  # the note above says the baseline's whole setup
            empty=AB_OVERLAY_WAITING if arms is not None else None)


def disturbed_note(runs: list) -> str:
    """'\n#2 was disturbed (window resized during the run): part of the speed-up may be the disturbance, ...' for the
    kept runs with a mark (app/runs.py, engine/hardware/host_noise.py), in the words of a comparison of history records
    (engine/records/history_compare.py); '' if none."""
    sentence = disturbed_sentence([(r.label, r.disturbed) for r in runs], of="the speed-up")
    return f"\n[$warning]{escape(sentence)}[/]" if sentence else ""


def ab_verdict_text(result) -> str:
    """The verdict lines of the Compare view: each arm's median (with its CI once there are enough blocks), the
    verdict on B/A per block pair, and why the arms' medians disagree with it when they do."""
    def arm_text(name, arm) -> str:
        ci = ci_text(arm)
        return f"{name} median {format_ms(arm.median_ms)}" + (f" (CI {ci})" if ci else "")

    head = f"A/B, {result.pairs} interleaved block pairs: " + " · ".join(arm_text(*arm) for arm in arm_pairs(result))
    verdict = result.verdict
    if verdict is None or not verdict.significant:
        style = "$text-muted"
    else:
        style = "$success" if verdict.ratio < 1 else "$error"
    lines = [head, f"[b {style}]{result.summary()}[/]"]
    # what B's speed costs in accuracy, beside the verdict
    lines += [f"[b ${level}]{label}:[/] {escape(value)}" if level else f"{label}: {escape(value)}"
              for label, value, level in ab_numerics_rows(result, brief=True)]
    disturbed = disturbed_sentence([("the comparison", disturbance_marks(result))])
    if disturbed:  # one line, in the words of a comparison of history records
        lines.append(f"[$warning]{escape(disturbed)}[/]")
    note = result.ratio_note()
    if note:
        lines.append(f"[dim]{note}[/]")
    gpu = [f"{name} {escape(text)}" for name, text in arm_conditions(result, brief=True)]
    if gpu:  # both arms on one line: the per-arm reasons are in the note when they differ
        lines.append("GPU  " + "  |  ".join(gpu))
    lines += [f"[$warning]note:[/] {escape(line)}" for line in result.notes]
    lines += [f"[b ${level}]{label}:[/] {escape(value)}" for label, value, level in state_rows(result)]
    return "\n".join(lines)
