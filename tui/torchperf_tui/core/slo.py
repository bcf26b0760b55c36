"""A latency budget at a quantile, as a user types it (`--slo p99=20ms`): which quantile, and the most it may take.
No torch: the CLI checks it where it enters, before any work starts."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from torchperf_tui.core.options import OptionError
from torchperf_tui.core.formatting import format_ms

_UNITS = {"us": 1e-3, "µs": 1e-3, "ms": 1.0, "s": 1000.0}
_SLO = re.compile(r"^p(\d{1,2}(?:\.\d+)?)=(\d+(?:\.\d+)?)\s*(us|µs|ms|s)$")
BUDGET_MAX_MS = 3_600_000.0  # an hour: past it a pass is not served, and a typo (ms for s, an extra zero) is likelier
EXAMPLE = "p99=20ms"


@dataclass(frozen=True)
class Slo:
    """The q-quantile of a pass's latency within `budget_ms`."""

    q: float  # 0-1: 0.99 for p99
    budget_ms: float

    @property
    def name(self) -> str:
        """'p99', 'p99.9'."""
        return f"p{self.q * 100:g}"

    def text(self) -> str:
        """'p99 within 20.00 ms'."""
        return f"{self.name} within {format_ms(self.budget_ms)}"

    def to_dict(self) -> dict:
        return {"quantile": self.q, "name": self.name, "budget_ms": self.budget_ms}


def parse_slo(text: str, name: str = "--slo") -> Slo:
    """'p99=20ms' -> Slo(0.99, 20.0): a quantile from p1 to p99.99 and a budget in us, ms or s, above zero and at most
    an hour; anything else one line naming what to write."""
    match = _SLO.match(str(text).strip().lower())
    if match is None:
        raise OptionError(f"{name}: {text!r}: write pQ=BUDGET with a unit, e.g. {EXAMPLE}, p90=0.5s or p50=800us")
    percent, value, unit = float(match.group(1)), float(match.group(2)), match.group(3)
    if not 1.0 <= percent < 100.0:
        raise OptionError(f"{name}: {text!r}: the quantile runs from p1 to below p100 (p50 the median)")
    budget = value * _UNITS[unit]
    if not math.isfinite(budget) or budget <= 0 or budget > BUDGET_MAX_MS:
        raise OptionError(f"{name}: {text!r}: the budget must be above 0 and at most an hour")
    return Slo(q=round(percent / 100.0, 6), budget_ms=budget)
