"""Exporting a large history: `export --format json --output FILE` (and md, csv, `history`) on a ~200 MB
history.jsonl, the streamed export against the one before it (OLD_COMMIT: every record loaded into a list, the
whole JSON text built in memory with indent=2, then written).

The history is synthetic (no torch needed): timing records of 50, 200 and 1,000 samples, an A/B arm pair and a
generation, as the app writes them, repeated with fresh ids to the target size, in a temporary folder deleted at
the end. Each export runs as the CLI in a fresh process; its peak RSS is the child's maximum resident set
(getrusage of the waited child), beside that of a process that only imports the CLI's modules. What matters here
is memory, which the load of the machine does not change; the seconds are wall time on whatever box it ran on.

    PYTHONPATH=tui .venv/bin/python bench/export_stream.py [--size-mb 200] [--skip-old]
"""

from __future__ import annotations

import dataclasses
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from large_history import ROOT, bench_run, write_history  # bench/large_history.py
OLD_COMMIT = "12c8f47"  # the export before it was streamed


def templates() -> list[dict]:
    """Records as the app writes them, with figures given outright: three timing runs, an A/B pair, a generation."""
    sys.path.insert(0, str(ROOT))
    from tests.records import make_record  # the suite's synthetic records: stats given outright
    from torchperf_tui.engine.records.history_records import compact_samples

    out = []
    for n in (50, 200, 1000):
        record = make_record(10.0)
        samples = compact_samples([10.0 + (i % 17) * 0.0371 for i in range(n)])
        record = dataclasses.replace(record, samples_ms=samples, stats=dataclasses.replace(record.stats, n=n),
                                     details={"warmup_iters": 10, "compile_mode": None, "source": "torchvision"})
        out.append(record.to_dict())
    arm_a, arm_b = make_record(11.0), make_record(9.0)
    out.append(dataclasses.replace(arm_a, kind="ab", details={"arm": "A", "pair": arm_b.id, "step": "infer"}).to_dict())
    out.append(dataclasses.replace(arm_b, kind="ab", details={"arm": "B", "pair": arm_a.id, "step": "infer"}).to_dict())
    generation = dataclasses.replace(make_record(12.0, model="hf:gpt2"), kind="generate", input_shape=(1, 128),
                                     details={"new_tokens": 64, "prompt_len": 128, "tokens_per_s": 81.3,
                                              "ttft_stats": {"p50_ms": 45.2}, "step": "infer"})
    out.append(generation.to_dict())
    return out


def run_cli(package: Path, argv: list[str]) -> tuple[float, float, int]:
    """The CLI of `package` (a tui/ folder) run with `argv` in a fresh process: (seconds, peak RSS MiB, exit code)."""
    env = dict(os.environ, PYTHONPATH=str(package))
    with tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        proc = subprocess.Popen([sys.executable, *argv], cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - started
        proc.returncode = code = os.waitstatus_to_exitcode(status)
        if code != 0:
            err.seek(0)
            raise SystemExit(f"{argv} failed: {err.read().decode()[-2000:]}")
    return seconds, usage.ru_maxrss / 1024, code  # ru_maxrss: KiB on Linux


def main() -> int:
    with bench_run(__doc__, "this export", "export_stream.txt") as (args, tmp, say):
        old = tmp / "old"
        if not args.skip_old:
            old.mkdir()
            archive = subprocess.run(["git", "archive", OLD_COMMIT, "tui"], cwd=ROOT, capture_output=True, check=True)
            subprocess.run(["tar", "-x", "-C", str(old)], input=archive.stdout, check=True)
        new = ROOT / "tui"
        path = tmp / "history.jsonl"
        started = time.perf_counter()
        count, size = write_history(path, templates(), int(args.size_mb * 2**20))
        load = os.getloadavg()[0]
        say(f"export of a large history on {platform.node() or 'this machine'} ({os.cpu_count()} cores, Python "
            f"{platform.python_version()}), {time.strftime('%Y-%m-%d')}; load average {load:.1f} at the start")
        say("the box is shared and loaded: the seconds are wall time under that load, not a speed; the peak RSS "
            "(what this measures) does not depend on the load")
        say(f"history.jsonl: {size / 2**20:.0f} MiB, {count:,} synthetic records (timing runs of 50-1,000 samples, A/B "
            f"arms, generations), made in {time.perf_counter() - started:.0f} s")
        say("each row: the CLI in a fresh process, output to a file (--output) or /dev/null; peak RSS of that process")
        say()
        imports = ["-c", "import torchperf_tui.cli, torchperf_tui.cli.history"]
        rows = [("imports only (the floor)", imports)]
        for fmt in ("json", "md", "csv"):
            rows.append((f"export --format {fmt}", ["-m", "torchperf_tui", "--history", str(path), "export",
                                                     "--format", fmt, "--output", str(tmp / f"{{version}}.{fmt}")]))
        rows.append(("history (every line, to /dev/null)", ["-m", "torchperf_tui", "--history", str(path), "history"]))
        versions = [("new", new)] + ([] if args.skip_old else [("old", old / "tui")])
        say(f"{'':38}" + "".join(f"{name + ' s':>10}{name + ' peak MiB':>15}" for name, _ in versions))
        for label, argv in rows:
            cells = []
            for name, package in versions:
                if name == "old" and label.startswith(("export --format md", "export --format csv", "history")):
                    cells.append(f"{'-':>10}{'-':>15}")  # the old export of these loads the same list as json's
                    continue
                seconds, peak, _ = run_cli(package, [arg.replace("{version}", name) for arg in argv])
                cells.append(f"{seconds:>10.1f}{peak:>15.0f}")
            say(f"{label:<38}" + "".join(cells))
        say()
        mib = {name: (tmp / f"{name}.json").stat().st_size / 2**20 for name, _ in versions}
        say(f"the JSON written: {mib['new']:.0f} MiB, one record a line"
            + ("" if args.skip_old else f" (the old one, indent=2: {mib['old']:.0f} MiB)"))
        say("json, md and history hold one record at a time; csv's rows (no samples) wait in a temporary file until "
            "the last record names every flag.* and env.* column of its header")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
