"""What `history --changes` finds (engine/records/change_points.py) in series of record medians made up here: how often
it finds a change point in noise alone (a false alarm; normal noise and Student's t with 3 degrees of freedom, whose
tails put a slow record in every series or so), and how often it finds a planted step at its record (within two) and
nothing else, for steps of 5 to 30 % in 1 to 5 % noise between one record's median and the next.

    .venv/bin/python bench/change_points.py [--trials 100] [--output bench/results/change_points.txt]
"""

from __future__ import annotations

import argparse
import platform
import time
from importlib.metadata import version
from pathlib import Path

import numpy as np

from torchperf_tui.engine.records.change_points import SeriesPoint, change_points


def points(medians) -> list[SeriesPoint]:
    return [SeriesPoint(f"r{i}", "", float(m)) for i, m in enumerate(medians)]


def noise(rng, n: int, spread: float, tails: str) -> np.ndarray:
    draw = rng.standard_t(3, n) if tails == "t3" else rng.normal(0, 1, n)
    return 1 + spread * draw


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=100)
    parser.add_argument("--output", default=str(Path(__file__).parent / "results" / "change_points.txt"))
    args = parser.parse_args()
    lines = [f"bench/change_points.py: {args.trials} series per row, ruptures {version('ruptures')}, "
             f"scipy {version('scipy')}, Python {platform.python_version()}", ""]
    started = time.perf_counter()
    lines.append("noise alone: series with any change point (false alarms)")
    for n in (20, 40, 200):
        for spread in (0.01, 0.03):
            for tails in ("normal", "t3"):
                alarms = sum(bool(change_points(points(10 * noise(np.random.default_rng(seed), n, spread, tails))))
                             for seed in range(args.trials))
                lines.append(f"  {n:4d} records, {spread:.0%} {tails:6s} noise: {alarms:3d} of {args.trials}")
    lines += ["", "a step after 20 records, 20 after it: found at its record (within 2) and nothing else"]
    for spread in (0.01, 0.02, 0.03, 0.05):
        cells = []
        for step in (1.05, 1.10, 1.20, 1.30):
            found = 0
            for seed in range(args.trials):
                rng = np.random.default_rng(seed)
                medians = np.r_[10 * noise(rng, 20, spread, "normal"), 10 * step * noise(rng, 20, spread, "normal")]
                changes = change_points(points(medians))
                found += len(changes) == 1 and abs(changes[0].index - 20) <= 2
            cells.append(f"+{step - 1:.0%}: {found:3d}")
        lines.append(f"  {spread:.0%} noise: " + ", ".join(cells) + f" of {args.trials}")
    lines += ["", f"took {time.perf_counter() - started:.0f} s"]
    text = "\n".join(lines) + "\n"
    print(text, end="")
    Path(args.output).write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
