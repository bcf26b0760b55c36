"""What the GPU was doing while a run was timed, summed up per run (or per A/B arm): SM and memory clocks, NVML
clock-event (throttle) reasons, temperature, power and the energy per inference; and whether two measurements ran
under unlike conditions (`throttle_note`). The readings are taken by engine/hardware/condition_sampler.py.

A GPU that hits its power cap or a thermal limit lowers its clocks, and every latency after that is slower
for a reason that has nothing to do with the model or its flags. nvbench flags such samples; here
`RunConditions` says whether the run throttled, at which clocks it ran, and what one inference cost in energy.

Energy: NVML's total energy counter (millijoules since the driver loaded, Volta and later) read at the start
and end of each timed window; the difference over the window's items is J per inference. The window holds
the gaps between iterations too (the GPU idles there, drawing idle power), so this is the energy of the run
as timed, not of the kernels alone. Where the counter is missing, the mean of the power readings times the
window's wall time stands in, and the method says so.

Both move in coarse steps: NVML's power is an average over up to a second, and on the A100 and H100 it samples
about a quarter of the time (Yang et al., "Accurate and Convenient Energy Measurements for GPUs", SC24). A window
much shorter than that reads the counter's steps, not the work: on an H200, A/B blocks of about 50 ms gave SDPA's
math arm 2.7x the flash arm's energy per inference at the same power, for a latency only 1.28x. So energy is judged only where the median
timed window lasts SHORT_WINDOW_S or more; below that the counter's delta is kept (`energy_j`, for the JSON) but no
figure per inference is given, and `energy_text` says why and what lengthens the windows.

No torch and no textual here.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from torchperf_tui.core.formatting import format_energy
from torchperf_tui.engine.hardware.gpm import gpm_text

DEFAULT_PERIOD_S = 0.1  # between two readings of the sampler inside a timed window
THROTTLED_SHARE = 0.05  # a run is called throttled from this share of its readings; below it, "briefly"
SHORT_WINDOW_S = 1.0  # energy is judged over timed windows this long or longer: the counter and power move in coarse steps
CLOCK_GAP_NOTE = 0.03  # A/B: an SM clock median this share below the other's is worth a note
THROTTLE_GAP_NOTE = 0.10  # A/B: throttled shares of readings this far apart are worth a note

# NVML clock-event reasons (nvmlClocksEventReason*, formerly nvmlClocksThrottleReason*): bit -> (words, whether
# it slows a running workload). Idle, application clocks, sync boost and the display clock are the GPU at
# rest or a setting the user chose; the others are the GPU protecting itself, which is throttling.
CLOCK_EVENT_REASONS: tuple[tuple[int, str, bool], ...] = (
    (0x1, "GPU idle", False),
    (0x2, "application clocks setting", False),
    (0x4, "power cap (software)", True),
    (0x8, "hardware slowdown", True),
    (0x10, "sync boost", False),
    (0x20, "thermal slowdown (software)", True),
    (0x40, "thermal slowdown (hardware)", True),
    (0x80, "power brake (hardware)", True),
    (0x100, "display clock setting", False),
)
THROTTLE_MASK = sum(bit for bit, _, slows in CLOCK_EVENT_REASONS if slows)


def per_item_word(step: str | None) -> str:
    """What energy is per: an inference, or a training sample (`step`: "infer", "train", "train (sgd) · ...")."""
    return "training sample" if (step or "").startswith("train") else "inference"


def reason_names(mask: int) -> list[str]:
    """The words for each reason bit set in `mask`, in NVML's order."""
    return [words for bit, words, _ in CLOCK_EVENT_REASONS if mask & bit]


@dataclass(frozen=True)
class RunConditions:
    """The GPU over a run's timed windows. Medians and means are over the readings inside the windows."""

    gpu_index: int | None  # NVML's index of the GPU (None: NVML could not be read at all)
    readings: int = 0
    window_s: float = 0.0  # the timed windows' wall time, summed
    windows: int = 0  # how many timed windows (a run's timed iterations: one; an A/B arm: one per block)
    window_median_s: float = 0.0  # the median length of one window: what the energy counter's steps are set against
    period_s: float | None = DEFAULT_PERIOD_S  # between readings inside a window (None: its edges only)
    sm_clock_mhz: float | None = None  # median
    sm_clock_min_mhz: int | None = None
    sm_clock_max_mhz: int | None = None  # the GPU's SM clock limit (nvmlDeviceGetMaxClockInfo), for reference
    mem_clock_mhz: float | None = None  # median
    temperature_start_c: int | None = None
    temperature_max_c: int | None = None
    power_mean_w: float | None = None
    power_max_w: float | None = None
    reasons: dict[str, float] = field(default_factory=dict)  # reason -> share of readings it was active in
    throttled_share: float | None = None  # share of readings with a slowdown reason (None: reasons unreadable)
    energy_j: float | None = None
    energy_method: str = ""
    items: int = 0  # inferences (or training samples) in the windows
    missing: dict[str, str] = field(default_factory=dict)  # what could not be read, and why
    # The GPU's own counters over the windows (engine/hardware/gpm.py): name -> percent; {} where it has none.
    gpm: dict[str, float] = field(default_factory=dict)
    # The GPU's other processes over the windows (engine/hardware/gpu_tenants.py) and how it is shared (MIG, MPS)
    tenants: list[Any] = field(default_factory=list)
    sharing: str = ""
    pcie: str = ""  # the PCIe link as the first window opened, under load: 'Gen5 x16 (max Gen5 x16)'

    @property
    def throttled(self) -> bool:
        """Slowed in at least THROTTLED_SHARE of the readings (a power cap that flickers once in a long run is
        said as "briefly throttled", not as a throttled run)."""
        return self.throttled_share is not None and self.throttled_share >= THROTTLED_SHARE

    @property
    def slowdown_reasons(self) -> list[str]:
        slowing = {words for _, words, slows in CLOCK_EVENT_REASONS if slows}
        return [name for name in self.reasons if name in slowing]

    @property
    def windows_too_short(self) -> bool:
        """There is an energy figure, but over timed windows too short for the counter's steps."""
        return self.energy_j is not None and self.window_median_s < SHORT_WINDOW_S

    @property
    def energy_too_coarse(self) -> str | None:
        """Why the energy is not judged per item (the timed windows were too short for the counter's steps), or
        None when it is."""
        if not self.windows_too_short:
            return None
        many = f" (median of {self.windows})" if self.windows > 1 else ""
        return (f"each timed window lasted {_seconds(self.window_median_s)}{many}, and NVML's energy counter and "
                f"power move in steps too coarse for windows under {SHORT_WINDOW_S:g} s: longer windows give a "
                "figure (more timed iterations: --iters, or an A/B's --per-block)")

    @property
    def energy_per_item_j(self) -> float | None:
        if self.energy_j is None or self.items <= 0 or self.windows_too_short:
            return None
        return self.energy_j / self.items

    @property
    def items_per_joule(self) -> float | None:
        each = self.energy_per_item_j
        return 1.0 / each if each else None

    def throttle_text(self) -> str:
        """'throttled: power cap (software) in 40 % of 52 readings (SM clock median 1755 MHz, ...)'; '' when no
        reading saw a slowdown (or the reasons could not be read)."""
        if not self.throttled_share:
            return ""
        shares = ", ".join(f"{name} in {_pct(self.reasons[name])}" for name in self.slowdown_reasons)
        word = "throttled" if self.throttled else "briefly throttled"
        return (f"{word}: {shares} of {self.readings} readings ({self.clock_text()}): samples timed while it was "
                "active may be slower than at full clock")

    def throttle_word(self) -> str:
        """'not throttled', 'THROTTLED 40 %: power cap (software)', 'briefly throttled (2 %: ...)', or n/a."""
        share = self.throttled_share
        if share is None:
            return f"throttling n/a ({self.missing.get('reasons', 'not read')})"
        if not share:
            return "not throttled"
        reasons = ", ".join(self.slowdown_reasons)
        return f"THROTTLED {_pct(share)}: {reasons}" if self.throttled else f"briefly throttled ({_pct(share)}: {reasons})"

    def clock_text(self) -> str:
        if self.sm_clock_mhz is None:
            return f"SM clock n/a ({self.missing.get('sm_clock', 'not read')})"
        low = (f", lowest {self.sm_clock_min_mhz}" if self.sm_clock_min_mhz is not None
               and self.sm_clock_min_mhz < self.sm_clock_mhz else "")
        top = f" of {self.sm_clock_max_mhz} max" if self.sm_clock_max_mhz else ""
        return f"SM clock median {self.sm_clock_mhz:.0f} MHz{low}{top}"

    def energy_text(self, step: str = "infer") -> str:
        """'213 mJ per inference (4.69 inferences per J; NVML energy counter ..., over 3.2 s)', or why there is
        none; per training sample when `step` is a training step."""
        per = per_item_word(step)
        coarse = self.energy_too_coarse
        if coarse:
            return f"energy n/a per {per}: {coarse}"
        each, rate = self.energy_per_item_j, self.items_per_joule
        if each is None or rate is None:
            return f"energy n/a ({self.missing.get('energy', 'nothing was timed')})"
        rate_text = f"{rate:,.0f}" if rate >= 100 else f"{rate:.3g}"
        return (f"{format_energy(each)} per {per} ({rate_text} {per}s per J; {self.energy_method}, over "
                f"{self.window_s:.1f} s)")

    def summary(self) -> str:
        """One line: clocks, temperature, power, and throttling in a word."""
        if self.gpu_index is None:
            return f"GPU clocks, power and energy n/a ({self.missing.get('nvml', 'NVML not available')})"
        parts = [self.clock_text()]
        if self.mem_clock_mhz is not None:
            parts.append(f"memory {self.mem_clock_mhz:.0f} MHz")
        if self.temperature_max_c is not None:
            start = self.temperature_start_c
            parts.append(f"{start}-{self.temperature_max_c} °C" if start is not None and start != self.temperature_max_c
                         else f"{self.temperature_max_c} °C")
        if self.power_mean_w is not None:
            parts.append(f"{self.power_mean_w:.0f} W mean, {self.power_max_w:.0f} W highest reading")
        parts.append(self.throttle_word())
        return " · ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        """Every field, and what follows from them (throttled, J per item, items per J)."""
        return {**asdict(self), "throttled": self.throttled, "energy_per_item_j": self.energy_per_item_j,
                "items_per_joule": self.items_per_joule}

    def short(self, step: str = "infer", brief: bool = False) -> str:
        """A few words for a status line: 'SM 1755/1980 MHz · 61 °C · 312 W · 213 mJ/inference · not throttled'
        (per training sample when `step` is a training step); `brief` leaves out the temperature and power."""
        if self.gpu_index is None:
            return f"clocks n/a ({self.missing.get('nvml', 'NVML not available')})"
        parts = []
        if self.sm_clock_mhz is not None:
            top = f"/{self.sm_clock_max_mhz}" if self.sm_clock_max_mhz else ""
            parts.append(f"SM {self.sm_clock_mhz:.0f}{top} MHz")
        if self.temperature_max_c is not None and not brief:
            parts.append(f"{self.temperature_max_c} °C")
        if self.power_mean_w is not None and not brief:
            parts.append(f"{self.power_mean_w:.0f} W")
        if self.energy_per_item_j is not None:
            parts.append(f"{format_energy(self.energy_per_item_j)}/{per_item_word(step)}")
        elif self.windows_too_short:
            parts.append(f"energy n/a ({_seconds(self.window_median_s)} windows)")
        if self.throttled_share is not None:
            parts.append(self.throttle_word())
        if self.gpm and not brief:
            parts.append(gpm_text(self.gpm))
        return " · ".join(parts) or "nothing NVML could read"

    def fingerprint(self) -> dict[str, Any]:
        """Flat keys for a history record's fingerprint: the conditions its numbers were measured under."""
        return {
            "gpu_sm_clock_mhz": _rounded(self.sm_clock_mhz),
            "gpu_sm_clock_min_mhz": self.sm_clock_min_mhz,
            "gpu_sm_clock_limit_mhz": self.sm_clock_max_mhz,
            "gpu_mem_clock_mhz": _rounded(self.mem_clock_mhz),
            "gpu_temperature_max_c": self.temperature_max_c,
            "gpu_power_mean_w": _rounded(self.power_mean_w, 1),
            "gpu_throttled": None if self.throttled_share is None else self.throttled,
            "gpu_throttled_share": _rounded(self.throttled_share, 3),
            "gpu_throttle_reasons": ", ".join(self.slowdown_reasons),
            "gpu_energy_per_item_j": self.energy_per_item_j,
            "gpu_energy_method": self.energy_method,
            "gpu_energy_window_s": _rounded(self.window_median_s, 3),
            "gpu_condition_readings": self.readings,
            **{f"gpu_gpm_{name}_pct": _rounded(value, 1) for name, value in self.gpm.items()},
            "gpu_other_processes": len(self.tenants),
            "gpu_pcie": self.pcie,
            "gpu_sharing": self.sharing,
        }


def _seconds(value: float) -> str:
    return f"{value * 1000:.0f} ms" if value < 1 else f"{value:.1f} s"


def _rounded(value: float | None, digits: int = 0) -> float | None:
    return None if value is None else round(value, digits)


def throttle_note(a: RunConditions | None, b: RunConditions | None, names: tuple[str, str] = ("A", "B"),
                  parts: str = "blocks", effect: str = "part of B/A may be the clocks, not the arms' difference") -> str | None:
    """A line when one of two measurements (A/B arms, timing modes) ran throttled, or at lower clocks, more than
    the other; None when they ran alike or either could not be read."""
    if a is None or b is None or a.gpu_index is None or b.gpu_index is None:
        return None
    first, second = names
    if a.throttled_share is not None and b.throttled_share is not None:
        gap = b.throttled_share - a.throttled_share
        if abs(gap) >= THROTTLE_GAP_NOTE:
            (more, c_more), (less, c_less) = ((second, b), (first, a)) if gap > 0 else ((first, a), (second, b))
            why = ", ".join(c_more.slowdown_reasons) or "a slowdown"
            return (f"{more} ran throttled more than {less} ({why} in {_pct(c_more.throttled_share)} of its readings, "
                    f"{_pct(c_less.throttled_share)} of {less}'s; SM clock median {_mhz(c_more.sm_clock_mhz)} vs "
                    f"{_mhz(c_less.sm_clock_mhz)}): {effect}")
    if a.sm_clock_mhz and b.sm_clock_mhz:
        low, high = sorted((a.sm_clock_mhz, b.sm_clock_mhz))
        gap = 1.0 - low / high  # how much lower the lower clock is, as a share of the higher
        if gap >= CLOCK_GAP_NOTE:
            lower = second if b.sm_clock_mhz < a.sm_clock_mhz else first
            return (f"the SM clock ran {_pct(gap)} lower during {lower}'s {parts} (median {_mhz(a.sm_clock_mhz)} "
                    f"for {first}, {_mhz(b.sm_clock_mhz)} for {second}): {effect}")
    return None


def _pct(share: float) -> str:
    return f"{share * 100:.0f} %"


def _mhz(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.0f} MHz"
