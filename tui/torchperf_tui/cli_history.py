"""`history` and `export`: the history file's records, listed or written out for other tools. Records are read
without torch (engine/records), so these commands start at once."""

from __future__ import annotations

import sys

from torchperf_tui.cli_args import PROG


def load_history(args, last: int | None = None):
    """The history's records (with `last`, only the newest, read from the end of the file); bad lines are one
    warning line. A history that is not a regular file is a TorchperfError: exit 2."""
    from torchperf_tui.engine.records.history_file import HistoryFile

    loaded = HistoryFile(args.history).load(last=last)
    for warning in loaded.warnings:
        print(f"{PROG}: warning: {warning}", file=sys.stderr)
    return loaded


def history_command(args) -> int:
    from torchperf_tui.engine.records.export import export_records

    loaded = load_history(args, last=args.last)
    records = loaded.records
    if args.json:
        print(export_records(records, "json"))
    elif not records:
        print(f"no runs recorded yet ({loaded.path})")
    else:
        for record in records:
            print(record.summary())
    return 0


def export_command(args) -> int:
    from torchperf_tui.engine.records.export import export_records

    loaded = load_history(args, last=args.last)
    records = loaded.records
    text = export_records(records, args.format, getattr(args, "metric", None))
    if args.output is not None and args.output != "-":  # '-' is stdout, as for most tools, not a file named '-'
        from torchperf_tui.engine.records.output_files import write_text

        write_text(args.output, text)  # beside the target, then renamed; a non-regular target is refused
        print(f"wrote {_written(records, args.format, text)} to {args.output}", file=sys.stderr)
    else:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
    return 0


def _written(records, fmt: str, text: str) -> str:
    """'2 runs'; for the fleet formats what the file holds and of which runs: '3 entries (2 runs, 1 cancelled left
    out)'."""
    if fmt not in ("github-benchmark", "pytorch-v3"):
        return f"{len(records)} runs"
    import json

    cancelled = sum(r.cancelled for r in records)
    count = len(json.loads(text))
    noun = ("entry" if count == 1 else "entries") if fmt == "github-benchmark" else ("row" if count == 1 else "rows")
    tail = f", {cancelled} cancelled left out" if cancelled else ""
    return f"{count} {noun} ({len(records) - cancelled} runs{tail})"
