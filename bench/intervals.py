"""A bootstrap interval for a bench's median ratio, and the verdict it allows against a budget.

On a shared 2-core VM the same code reads 20-40 % apart from one call to the next (bench/results/first_frame.txt,
tui_fidelity.txt). A median of a few ratios then says little by itself: the benches that hold a ratio to a budget
print its interval too, and call it within the budget only where the whole interval is.
"""

from __future__ import annotations

import random
import statistics

RESAMPLES, LEVEL = 4000, 0.90


def median_interval(ratios: list[float], seed: int = 0) -> tuple[float, float]:
    """A bootstrap interval (LEVEL, percentile method) of the median of `ratios`, resampling them."""
    rng = random.Random(seed)
    medians = sorted(statistics.median(rng.choices(ratios, k=len(ratios))) for _ in range(RESAMPLES))
    tail = (1 - LEVEL) / 2
    return medians[int(tail * RESAMPLES)], medians[int((1 - tail) * RESAMPLES) - 1]


def verdict(low: float, high: float, budget: float) -> str:
    """'within' where the whole interval is, 'OVER' where the whole interval is above, else 'not settled'."""
    return "within" if high <= budget else "OVER" if low > budget else "not settled"
