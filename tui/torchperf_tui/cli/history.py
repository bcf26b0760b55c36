"""`history` and `export`: the history file's records, listed or written out for other tools, and `history
--changes`, where each set-up's median stepped (engine/records/change_points.py). Records are read
without torch (engine/records), so these commands start at once. Without --last the file is read a line at a time
as the records are listed or written, so a history of any size takes one record's memory (CSV and the fleets'
formats keep what they need of each record: wording/history_export.py)."""

from __future__ import annotations

import json
import os
import sys
from contextlib import contextmanager

from torchperf_tui.core.errors import PROG
from torchperf_tui.core.errors import TorchperfError
from torchperf_tui.engine.records.history_file import HistoryFile
from torchperf_tui.core.json_checks import nonfinite_to_none
from torchperf_tui.core.output_files import write_output
from torchperf_tui.engine.records.change_points import history_changes
from torchperf_tui.wording.history import history_line
from torchperf_tui.wording.history_changes import no_series_line, series_lines
from torchperf_tui.wording.history_export import Exported, check_format, write_export


def open_history(args, last: int | None = None):
    """The records asked for, to iterate once, and what holds the warnings about the bad lines (read once the
    records are): with `last`, the newest, read from the end of the file; else every record, as they are read. A
    history that is not a regular file is a TorchperfError: exit 2."""
    history = HistoryFile(args.history)
    if last is not None:
        loaded = history.load(last=last)
        return loaded.records, loaded
    stream = history.stream()
    return stream, stream


def warn_skipped(source) -> None:
    """The bad lines the read skipped: one warning line, however many."""
    for warning in source.warnings:
        print(f"{PROG}: warning: {warning}", file=sys.stderr)


@contextmanager
def standard_output():
    """Writing the records to stdout: a reader that stops early (`history | head`) has what it wanted, said
    nothing; a stdout that cannot be written (/dev/full) is one line and exit 2, not a traceback."""
    try:
        yield
        sys.stdout.flush()
    except OSError as exc:
        try:  # what is still buffered would fail again when Python flushes stdout at exit
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except (OSError, ValueError):  # a stdout that is no file (a test's capture)
            pass
        if not isinstance(exc, BrokenPipeError):
            raise TorchperfError(f"cannot write the standard output: {exc.strerror or exc}") from None


def history_command(args) -> int:
    if args.changes:
        return changes_command(args)
    records, source = open_history(args, last=args.last)
    with standard_output():
        if args.json:
            write_export(records, "json", sys.stdout)
        else:
            count = 0
            for record in records:
                print(history_line(record))
                count += 1
            if not count:
                print(f"no runs recorded yet ({source.path})")
    warn_skipped(source)
    return 0


def changes_command(args) -> int:
    """`history --changes`: each set-up's change points (engine/records/change_points.py). The history is read
    twice without --last (once for the medians, once more for the runs beside a change point), so its size costs
    its medians' memory, not its records'."""
    records, source = open_history(args, last=args.last)

    def again():
        return records if args.last is not None else HistoryFile(args.history).stream()  # --last: already read

    found = history_changes(records, again)
    with standard_output():
        if args.json:
            print(json.dumps(nonfinite_to_none([series.to_dict() for series in found]), indent=2))
        elif not found:
            print(no_series_line(source.path))
        else:
            for series in found:
                for line in series_lines(series):
                    print(line)
    warn_skipped(source)
    return 0


def export_command(args) -> int:
    metric = getattr(args, "metric", None)
    fmt = check_format(args.format, metric)  # before the history is read or a file is made
    records, source = open_history(args, last=args.last)
    if args.output is not None and args.output != "-":  # '-' is stdout, as for most tools, not a file named '-'
        exported: list[Exported] = []

        def fill(temp: str) -> None:
            with open(temp, "w", encoding="utf-8", newline="") as out:
                exported.append(write_export(records, fmt, out, metric))
                out.flush()
                os.fsync(out.fileno())

        write_output(args.output, fill)  # beside the target, then renamed; a non-regular target is refused
        warn_skipped(source)
        print(f"wrote {_written(exported[0], fmt)} to {args.output}", file=sys.stderr)
    else:
        with standard_output():
            write_export(records, fmt, sys.stdout, metric)
        warn_skipped(source)
    return 0


def _written(exported: Exported, fmt: str) -> str:
    """'2 runs'; for the fleet formats what the file holds and of which runs: '3 entries (2 runs, 1 cancelled left
    out)'."""
    if exported.entries is None:
        return f"{exported.runs} runs"
    count = exported.entries
    noun = ("entry" if count == 1 else "entries") if fmt == "github-benchmark" else ("row" if count == 1 else "rows")
    cancelled = exported.cancelled
    tail = f", {cancelled} cancelled left out" if cancelled else ""
    return f"{count} {noun} ({exported.runs - cancelled} runs{tail})"
