"""Reading a large history: `history --last 1`, the full load (`history`, `export`) and the History tab's
first page, on a ~200 MB history.jsonl, this reader against the one before it (commit 3e40781's parent:
read_bytes() of the whole file, then split and parse every line; the tab showed every record).

The history is made of real records (resnet18 timed on the CPU with 50, 200 and 1,000 samples, one A/B arm
pair), repeated with fresh ids to the target size, in a temporary folder that is deleted at the end. Each
measurement runs in its own fresh process; "+MiB" is the peak RSS during the operation less the RSS just
before it (imports, and the Textual app for the tab, do not count). Linux only (/proc/self/clear_refs).

    PYTHONPATH=tui .venv/bin/python bench/history_reader.py [--size-mb 200] [--skip-old]
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from large_history import ROOT, bench_run, write_history  # bench/large_history.py
OLD_COMMIT = "3e40781~1"  # the reader and the pane before the change

# Runs in the child: prints one JSON line {"seconds", "records", "extra_mib"}. argv: version, op, path, old dir.
# extra_mib: the peak RSS during the operation less the RSS just before it (Linux resets the peak on writing 5
# to /proc/self/clear_refs), so imports and the Textual app started before do not count.
CHILD = textwrap.dedent('''
    import asyncio, importlib.util, json, sys, time
    version, op, path, old_dir = sys.argv[1:5]

    def load(name, file):
        spec = importlib.util.spec_from_file_location(name, file)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # dataclasses look their module up there
        spec.loader.exec_module(module)
        return module

    def status_kib(field):
        with open("/proc/self/status") as fh:
            return next(int(line.split()[1]) for line in fh if line.startswith(field + ":"))

    def start_memory():
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")  # the peak RSS (VmHWM) starts again from the RSS now
        return status_kib("VmRSS")

    def extra_mib(before):
        return (status_kib("VmHWM") - before) / 1024

    if version == "new":
        from torchperf_tui.engine.records.history_file import HistoryFile
        from torchperf_tui.app.widgets.history import history_pane as pane_module
    else:
        HistoryFile = load("old_results", f"{old_dir}/results.py").History
        pane_module = load("old_history_pane", f"{old_dir}/history_pane.py")

    def run_reader():
        before = start_memory()
        started = time.perf_counter()
        if op == "last1":
            loaded = HistoryFile(path).load(last=1) if version == "new" else HistoryFile(path).load()
            records = loaded.last(1)
        elif op == "full":
            records = HistoryFile(path).load().records
        elif op == "page":
            records = HistoryFile(path).load(last=pane_module.HistoryPane.PAGE_SIZE).records
        return len(records), time.perf_counter() - started, extra_mib(before)

    def run_tab():
        from textual.app import App

        class TabApp(App):
            def compose(self):
                yield pane_module.HistoryPane(id="history")

        async def main():
            app = TabApp()
            async with app.run_test(size=(120, 40)) as pilot:
                pane = app.query_one(pane_module.HistoryPane)
                table = pane.query_one("#history-table")
                await pilot.pause()
                before = start_memory()
                started = time.perf_counter()
                if version == "new":
                    pane.show_history(path)  # the pane reads its page in its own thread
                else:  # what the app did: read it all in a thread, then hand every record to the pane
                    loaded = await asyncio.to_thread(HistoryFile(path).load)
                    pane.show_records(loaded)
                while table.row_count == 0:
                    await pilot.pause(0.01)
                await pilot.pause()  # the first frame with the rows
                return len(pane.records), time.perf_counter() - started, extra_mib(before)

        return asyncio.run(main())

    count, seconds, extra = run_tab() if op == "tab" else run_reader()
    print(json.dumps({"seconds": seconds, "records": count, "extra_mib": extra}))
''')


def real_records() -> list[dict]:
    """Records as the app writes them: resnet18 timed on this CPU, at three run lengths, and an A/B pair."""
    from torchperf_tui.engine.measurements.flags import Flags
    from torchperf_tui.engine.records.history_records import record_from_timing
    from torchperf_tui.engine.measurements.bench_config import BenchConfig
    from torchperf_tui.engine.measurements.timing import run_benchmark

    records = []
    for iters in (50, 200, 1000):
        cfg = BenchConfig(model="resnet18", input_shape=(1, 3, 32, 32), device="cpu", warmup=3, iters=iters,
                          flags=Flags())
        records.append(record_from_timing(run_benchmark(cfg)).to_dict())
    try:  # an A/B pair too, if the engine's comparison runs here
        from torchperf_tui.engine.measurements.ab_arms import parse_arm_spec
        from torchperf_tui.engine.measurements.abtest import run_ab
        from torchperf_tui.engine.records.history_records import records_from_ab

        base = BenchConfig(model="resnet18", input_shape=(1, 3, 32, 32), device="cpu", warmup=3, iters=50)
        result = run_ab(base, parse_arm_spec("threads=1", base.flags), parse_arm_spec("threads=2", base.flags),
                        blocks=6, per_block=10)
        records.extend(r.to_dict() for r in records_from_ab(result))
    except Exception as exc:  # noqa: BLE001 -- the timing records are enough for a realistic file
        print(f"(no A/B records: {type(exc).__name__}: {exc})", file=sys.stderr)
    return records


def measure(version: str, op: str, path: Path, old_dir: Path) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT / "tui") + os.pathsep + str(ROOT))
    done = subprocess.run([sys.executable, "-c", CHILD, version, op, str(path), str(old_dir)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        raise SystemExit(f"{version} {op} failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> int:
    with bench_run(__doc__, "this reader", "history_reader.txt") as (args, tmp, say):
        old_dir = tmp / "old"
        old_dir.mkdir()
        for name, repo_path in (("results.py", "tui/torchperf_tui/engine/results.py"),
                                ("history_pane.py", "tui/torchperf_tui/app/widgets/history/history_pane.py")):
            text = subprocess.run(["git", "show", f"{OLD_COMMIT}:{repo_path}"], cwd=ROOT, capture_output=True,
                                  text=True, check=True).stdout
            (old_dir / name).write_text(text)

        started = time.perf_counter()
        templates = real_records()
        path = tmp / "history.jsonl"
        count, size = write_history(path, templates, int(args.size_mb * 2**20))
        sizes = sorted(len(json.dumps(t)) for t in templates)
        say(f"history reader on {platform.node() or 'this machine'} ({os.cpu_count()} cores, Python "
            f"{platform.python_version()}), {time.strftime('%Y-%m-%d')}")
        say(f"history.jsonl: {size / 2**20:.0f} MiB, {count:,} real records (resnet18 on the CPU, lines of "
            f"{sizes[0]:,}-{sizes[-1]:,} bytes), made in {time.perf_counter() - started:.0f} s")
        say("each row: a fresh process; seconds of the operation alone; +MiB: its peak RSS less the RSS before it")
        say()

        rows = [("history --last 1", "last1"), ("full load (history, export)", "full"),
                ("History tab: first page shown", "tab")]
        versions = ["new"] if args.skip_old else ["old", "new"]
        say(f"{'':31}" + "".join(f"{v + ' s':>9}{v + ' +MiB':>10}{'records':>9}" for v in versions)
            + ("" if args.skip_old else f"{'time old/new':>14}{'mem old/new':>13}"))
        for label, op in rows:
            cells, numbers = [], {}
            for version in versions:
                got = measure(version, op, path, old_dir)
                numbers[version] = (got["seconds"], got["extra_mib"])
                cells.append(f"{got['seconds']:>9.3f}{got['extra_mib']:>10.1f}{got['records']:>9,}")
            line = f"{label:<31}" + "".join(cells)
            if not args.skip_old:
                (t_old, m_old), (t_new, m_new) = numbers["old"], numbers["new"]
                line += f"{t_old / max(t_new, 1e-6):>13.1f}x{m_old / max(m_new, 0.1):>12.1f}x"
            say(line)
        page = measure("new", "page", path, old_dir)
        say()
        say(f"the tab's page read alone, HistoryFile.load(last=200): {page['seconds']:.3f} s, "
            f"+{page['extra_mib']:.1f} MiB, {page['records']} records")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
