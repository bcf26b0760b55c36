"""Run records as JSON to hand on: an array of the records whole (samples included), written one record at a time,
so that exporting a history of any size holds one record in memory, not the file's records and their text at once.
The text formats for people and spreadsheets (a Markdown table, CSV) word each record as `history` does:
wording/history_export.py; the fleets' formats are in engine/records/export_fleet.py.

No torch here: `export` reads the history without it.
"""

from __future__ import annotations

import json
from typing import Iterable, TextIO

from torchperf_tui.engine.records.history_records import HistoryRecord
from torchperf_tui.core.formatting import printable


def json_text(record: HistoryRecord) -> str:
    """The record as one line of JSON. A string from the file keeps its value but not its control characters
    (ESC, the C1 controls, bidirectional overrides) raw: they are written as JSON escapes ('\\u001b'), so the text
    cannot drive the terminal it is printed on and parses back to the same record."""
    return printable(json.dumps(record.to_dict(), ensure_ascii=False, allow_nan=False), json=True)


def write_json(records: Iterable[HistoryRecord], out: TextIO) -> int:
    """Write the records to `out` as a JSON array, one record a line, as they come; -> how many were written."""
    count = 0
    out.write("[")
    for record in records:
        out.write(",\n" if count else "\n")
        out.write(json_text(record))
        count += 1
    out.write("\n]\n" if count else "]\n")
    return count
