"""What the benches on a large history share (export_stream.py, history_reader.py): their options, the file
itself (records repeated with fresh ids to a size), and a report said line by line and kept for bench/results."""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@contextlib.contextmanager
def bench_run(doc: str, measured: str, out_name: str):
    """A bench's run: its options parsed (--size-mb, --skip-old to measure only `measured` and not the commit before
    it, --out: bench/results/OUT_NAME by default), a temporary folder for the history that goes at the end, and the
    report, written to --out when the run ends well. Yields (options, folder, say)."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("--size-mb", type=float, default=200.0)
    parser.add_argument("--skip-old", action="store_true", help=f"measure only {measured}")
    parser.add_argument("--out", default=str(ROOT / "bench/results" / out_name))
    args = parser.parse_args()
    report = Report()
    tmp = Path(tempfile.mkdtemp(prefix="torchperf-bench-"))
    try:
        yield args, tmp, report.say
    finally:
        shutil.rmtree(tmp, ignore_errors=True)  # the large file goes
    report.write(args.out)


def write_history(path: Path, records: list[dict], size: int) -> tuple[int, int]:
    """Repeat the records (the first, a 50-sample run, most often, as people mostly run the default) with fresh ids
    to `size` bytes. Returns (records, bytes)."""
    weights = [8, 2, 1] + [1] * (len(records) - 3)
    cycle = [i for i, w in enumerate(weights) for _ in range(w)]
    lines = [json.dumps(dict(r, id="@ID@"), ensure_ascii=False, allow_nan=False, separators=(",", ":")) + "\n"
             for r in records]
    written = count = 0
    with open(path, "w", encoding="utf-8") as fh:
        while written < size:
            line = lines[cycle[count % len(cycle)]].replace("@ID@", f"{count:012x}", 1)
            fh.write(line)
            written += len(line.encode("utf-8"))
            count += 1
    return count, written


class Report:
    """Lines said as they come (printed) and kept, then written whole to the results file."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def say(self, text: str = "") -> None:
        print(text, flush=True)
        self.lines.append(text)

    def write(self, path: str) -> None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text("\n".join(self.lines) + "\n")
        print(f"(written to {path})")
