"""`export`: the history's records as text to hand on, in the format asked for. JSON (the records whole, samples
included) and the fleets' formats are the engine's (engine/records/export.py, export_fleet.py); the Markdown table
(for people) and CSV (one row per run, for spreadsheets) word each record as `history` does (wording/history.py):
what kind of run it was, what its figures are per, when it finished and its marks, every string made printable.

JSON and Markdown are written a record at a time as the records come, so a history of any size is exported with one
record in memory; CSV names its columns (the union of every record's flags and environment keys) in its header, so
its rows wait in a temporary file until the last record is read.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import math
import tempfile
from dataclasses import dataclass
from typing import Any, Iterable, TextIO

from torchperf_tui.core.stats import TimingStats, percentile_supported
from torchperf_tui.core.errors import TorchperfError
from torchperf_tui.engine.records.export import write_json
from torchperf_tui.engine.records.export_fleet import export_fleet
from torchperf_tui.engine.records.fleet_records import FLEET_FORMATS
from torchperf_tui.engine.records.history_records import HistoryRecord
from torchperf_tui.core.formatting import UNSUPPORTED_LEGEND, format_ms, format_percentile, is_number, printable
from torchperf_tui.core.options import EXPORT_FORMATS
from torchperf_tui.wording.history import NO_FIGURE, history_row

STATS_COLUMNS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(TimingStats))
# `what` and `per` say what each row is ('A/B arm A', 'token'); `marks` its conditions as `history` says them, and
# `disturbed` the disturbance marks alone (empty: none), for a filter.
CSV_BASE_COLUMNS: tuple[str, ...] = ("id", "kind", "what", "per", "created_at", "model", "source", "model_args",
                                     "input_shape", "seq_len", "inputs", "batch", "dtype", "channels_last", "device",
                                     "cancelled", "duration_s", "timer", "compile_mode", "flags_text", "marks",
                                     "disturbed")
MD_COLUMNS: tuple[str, ...] = ("When (UTC)", "ID", "Kind", "Model", "Input", "dtype", "Device", "Per", "p50", "p90",
                               "p99", "Mean ± std", "Items/s (mean)", "First iter", "Flags", "Marks", "Device name")


@dataclass(frozen=True)
class Exported:
    """What an export wrote: `runs` records read, `cancelled` of them cancelled; `entries` what a fleet format's
    file holds (its entries or rows: a cancelled run is left out of those), None for the other formats."""

    runs: int
    cancelled: int = 0
    entries: int | None = None


def check_format(fmt: str, metric: str | None = None) -> str:
    """The format, lower case, if there is one of that name and `metric` goes with it (a fleet format's metric is
    export_fleet's to check); else a TorchperfError. Checked before anything is read or written."""
    fmt = fmt.strip().lower()
    if fmt == "markdown":
        fmt = "md"
    if fmt not in EXPORT_FORMATS:
        raise TorchperfError(f"unknown export format {fmt!r}: choose one of {', '.join(EXPORT_FORMATS)}")
    if metric is not None and fmt not in FLEET_FORMATS:  # a fleet format's own: export_fleet checks it
        raise TorchperfError(f"--metric chooses github-benchmark's file (latency or throughput); {fmt} has no choice")
    return fmt


def write_export(records: Iterable[HistoryRecord], fmt: str, out: TextIO, metric: str | None = None) -> Exported:
    """Write the records to `out` as `fmt`: "json" (an array of full records, samples included), "csv" (one row per
    run, flags as flag.*, environment as env.*, no samples), "md" (a Markdown table), or what fleets ingest:
    "github-benchmark" (`metric` latency or throughput) and "pytorch-v3" (engine/records/export_fleet.py)."""
    fmt = check_format(fmt, metric)
    if fmt in FLEET_FORMATS:
        kept = list(records)  # a fleet keeps the newest record of each set-up: it reads them all first
        text = export_fleet(kept, fmt, metric)
        out.write(text if text.endswith("\n") else text + "\n")
        return Exported(len(kept), sum(r.cancelled for r in kept), len(json.loads(text)))
    counted = _Counted(records)
    if fmt == "json":
        write_json(counted, out)
    elif fmt == "csv":
        _write_csv(counted, out)
    else:
        _write_md(counted, out)
    return Exported(counted.runs, counted.cancelled)


def export_records(records: Iterable[HistoryRecord], fmt: str = "json", metric: str | None = None) -> str:
    """The records as text in `fmt` (write_export's formats)."""
    out = io.StringIO()
    write_export(records, fmt, out, metric)
    return out.getvalue()


class _Counted:
    """The records passed on one at a time, counting them and the cancelled ones as they go."""

    def __init__(self, records: Iterable[HistoryRecord]) -> None:
        self._records, self.runs, self.cancelled = records, 0, 0

    def __iter__(self):
        for record in self._records:
            self.runs += 1
            self.cancelled += record.cancelled
            yield record


def _csv_value(value: Any) -> Any:
    """A cell: a number or a boolean as it is, nothing (None, inf, NaN) empty, anything else as printable text."""
    if value is None:
        return ""
    if is_number(value):
        return value if isinstance(value, int) or math.isfinite(value) else ""
    return value if isinstance(value, bool) else printable(value)


def _csv_row(record: HistoryRecord) -> dict[str, Any]:
    row = history_row(record)
    details = record.details
    cells: dict[str, Any] = {
        "id": record.id, "kind": record.kind, "what": row.kind, "per": row.per, "created_at": record.created_at,
        "model": record.model, "source": details.get("source", ""), "model_args": details.get("model_args", ""),
        "input_shape": record.shape_text, "seq_len": details.get("seq_len"), "inputs": details.get("inputs", ""),
        "batch": record.batch, "dtype": record.dtype, "channels_last": record.channels_last, "device": record.device,
        "cancelled": record.cancelled, "duration_s": record.duration_s, "timer": record.timer,
        "compile_mode": details.get("compile_mode"), "flags_text": record.flags_text, "marks": row.marks_text(),
        "disturbed": record.disturbed_text(),
    }
    stats = dataclasses.asdict(record.stats) if record.stats is not None else {}
    cells.update({k: stats.get(k) for k in STATS_COLUMNS})
    cells.update({f"flag.{printable(k)}": v for k, v in record.flags.items()})  # a key is from the file too
    cells.update({f"env.{printable(k)}": v for k, v in record.fingerprint.items()})
    return {k: _csv_value(v) for k, v in cells.items()}


def _write_csv(records: Iterable[HistoryRecord], out: TextIO) -> None:
    """The header names every record's flag.* and env.* keys, known at the last record: the rows (no samples) wait
    in a temporary file meanwhile, one JSON line each, so the memory stays flat however long the history."""
    flag_keys: dict[str, None] = {}
    env_keys: dict[str, None] = {}
    try:
        spill = tempfile.TemporaryFile("w+", encoding="utf-8")
    except OSError as exc:
        raise TorchperfError(f"cannot keep the CSV's rows in a temporary file: {exc.strerror or exc}") from None
    with spill:
        for record in records:
            row = _csv_row(record)
            for key in row:
                if key.startswith("flag."):
                    flag_keys[key] = None
                elif key.startswith("env."):
                    env_keys[key] = None
            _spill(spill, json.dumps(row, ensure_ascii=False) + "\n")
        spill.seek(0)
        # "\n" rather than csv's default "\r\n": the text goes to stdout or a text-mode file.
        writer = csv.DictWriter(out, fieldnames=[*CSV_BASE_COLUMNS, *STATS_COLUMNS, *flag_keys, *env_keys],
                                lineterminator="\n", restval="")
        writer.writeheader()
        for line in spill:
            writer.writerow(json.loads(line))


def _spill(spill: TextIO, line: str) -> None:
    try:
        spill.write(line)
    except OSError as exc:  # the temporary folder is full: say it is that, not the output
        raise TorchperfError(f"cannot keep the CSV's rows in a temporary file: {exc.strerror or exc}") from None


def _md_cell(value: Any) -> str:
    return printable(value).replace("|", "\\|")


def _write_md(records: Iterable[HistoryRecord], out: TextIO) -> None:
    out.write("| " + " | ".join(MD_COLUMNS) + " |\n" + "|" + "|".join("---" for _ in MD_COLUMNS) + "|\n")
    unsupported = False  # a percentile marked '?': the legend goes under the table
    for record in records:
        row = history_row(record)
        s = record.stats
        if s is None:
            numbers = [NO_FIGURE] * 6
        else:
            numbers = [format_percentile(s.p50_ms, 0.5, s.n), format_percentile(s.p90_ms, 0.9, s.n),
                       format_percentile(s.p99_ms, 0.99, s.n), f"{format_ms(s.mean_ms)} ± {format_ms(s.std_ms)}",
                       NO_FIGURE if s.fps is None else f"{s.fps:,.1f}",
                       NO_FIGURE if s.first_iter_ms is None else format_ms(s.first_iter_ms)]
            unsupported = unsupported or not percentile_supported(0.99, s.n)  # p99 needs the most samples
        cells = [record.created_at.replace("T", " ")[:19], row.short_id, row.kind, row.model,
                 row.shape + row.setup, row.dtype, row.device, row.per, *numbers, row.flags, row.marks_text(),
                 record.fingerprint.get("device_name", "")]
        out.write("| " + " | ".join(_md_cell(c) for c in cells) + " |\n")
    if unsupported:
        out.write("\n" + UNSUPPORTED_LEGEND + "; items/s is items over the total time (the mean's rate).\n")
