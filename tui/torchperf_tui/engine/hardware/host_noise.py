"""Whether the host was quiet while a measurement ran: the CPU that other processes used over its timed windows
(read at each window's two edges, outside the timer), the load average beside it, and how far the samples spread
above the fastest.

A latency measured on a host that is busy with something else is that something's as much as the model's: a
thread that shares its core with one other runnable thread gets half of it. The tester's busy host gave a p50
of 194 ms against a fastest sample of 2.87 ms, with no word. `HostProbe` reads the host at `begin()` and `end()`
of each timed window (one for a run; one per round share for a timing mode, per block for a sweep's length);
`summary(samples)` gives a `HostNoise` over all its windows with the figures and, past the thresholds below, one
line per finding ("noisy host: load 3.1 on 2 cores, ...", "noisy samples: p50 is 67x the fastest sample").

The host is judged by what was measured over the windows, the CPU other processes used there: the load average is
a mean over the last minute, and after a build or a test suite ends it stays high for a minute over a host that is
quiet again, so it is said beside the figure as context and judges alone only where the CPU times cannot be read.
A measurement with points (a throughput try, a timing mode, a sweep's length) carries one HostNoise per point and
says its marks per point (`point_marks`).

No torch and no textual: the UI process unpickles a HostNoise with the run's result and words it; psutil (a
dependency) is imported by the reader only. `HostReader` is the seam tests replace with a fake.
"""

from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Sequence

from torchperf_tui.core.stats import p50_over_min, share_above

# Other processes' CPU over the timed window, in cores, from which the host is called noisy. An idle desktop or
# server (daemons, a terminal, this app's UI redrawing twice a second) stays well under a tenth of a core; one
# other busy process (a build, a test suite, a CPU burner) shows as a whole core. Half a core held through the
# window is something else competing: on a CPU run the measurement's threads fill the cores, so it is taken from
# them; on a GPU run it is taken from the thread that launches the kernels whenever they meet.
OTHER_BUSY_CORES = 0.5
# ... unless a whole core stayed idle beside them through the window: the others' CPU then had a core to run on that
# the measurement did not need, and the scheduler puts them there. On a 2-core box a run fills both cores (a CPU run's
# threads, or a GPU run's launch thread and the app), so nothing changes there; on an H200 box of 16 cores a GPU run
# beside 0.7 of a core of other work (the app's redraws among it) was called noisy with 14 cores idle.
SPARE_CORES = 1.0
# Other processes' CPU seconds over a window are read from counters in clock ticks (10 ms) at both edges, the
# machine's and this process's: a reading is uncertain by a few ticks. The figure judges the window less this, so a
# window of a few milliseconds (a tiny model's run) cannot be called noisy by one tick landing in it: over 2 s the
# threshold moves from 0.5 to 0.525 cores, over 0.1 s to 1.0, and under 0.03 s nothing can reach it on 2 cores.
CPU_TIMES_SLACK_S = 0.05
# The 1-minute load average, per core, from which the host is called noisy where the CPU times cannot be read. A CPU
# run's own threads bring the load up to about the cores (one runnable thread per core); half as many again means
# that, on average, some thread is always waiting for a core. It lags by a minute: never judged where the CPU was read.
LOAD_PER_CORE = 1.5
# The samples: the median this many times the fastest sample. A quiet fixed-shape run is tight: the CLI's runs in
# bench/results/tui_fidelity.txt have their p90 within 3-10 % of their p50, resnet18 and a dispatch-bound model
# alike, so the median sits a few percent above the fastest; twice the fastest means half the iterations ran at
# half speed or slower, which is what sharing a core with one other runnable thread does, not what a model does
# from one iteration to the next.
P50_OVER_MIN = 2.0
# ... or this share of the samples slower than SLOW_FACTOR times the fastest: the occasional interrupt, page fault or
# garbage collection of a quiet run touches well under 1 sample in 100; 1 in 10 is a habit, not an accident.
SLOW_FACTOR = 2.0
SLOW_SHARE = 0.10
# Below this many samples one slow sample is 5 % or more: too few to tell a habit from an accident.
MIN_SPREAD_SAMPLES = 20


class HostReader:
    """Where the readings come from (the seam: tests pass a fake). Every method returns None where it cannot read,
    and `missing` says why."""

    def __init__(self) -> None:
        self.missing: dict[str, str] = {}
        self._process = None

    def now(self) -> float:
        return time.perf_counter()

    def cores(self) -> int | None:
        """Logical CPUs of the machine: the load average and the CPU times are the machine's, not this process's."""
        return os.cpu_count()

    def load(self) -> float | None:
        try:
            return float(os.getloadavg()[0])
        except (AttributeError, OSError) as exc:  # Windows has none
            self.missing["load"] = f"no load average here ({type(exc).__name__})"
            return None

    def busy_cpu_s(self) -> float | None:
        """CPU seconds the machine spent busy (every process, the kernel, and time stolen by a hypervisor)."""
        try:
            import psutil

            t = psutil.cpu_times()
        except Exception as exc:
            self.missing["cpu"] = f"psutil could not read the CPU times: {type(exc).__name__}"
            return None
        return sum(getattr(t, name, 0.0) for name in ("user", "nice", "system", "irq", "softirq", "steal"))

    def own_cpu_s(self) -> float | None:
        """CPU seconds this process spent (all its threads)."""
        try:
            if self._process is None:
                import psutil

                self._process = psutil.Process()
            t = self._process.cpu_times()
        except Exception as exc:
            self.missing["cpu"] = f"psutil could not read this process's CPU times: {type(exc).__name__}"
            return None
        return float(t.user + t.system)


@dataclass(frozen=True)
class HostReading:
    t: float
    load: float | None
    busy_s: float | None
    own_s: float | None


@dataclass(frozen=True)
class HostNoise:
    """The host over a run's timed window, and the spread of its samples. None where a figure could not be read
    (`missing` says why) or does not apply (the spread of a varying shape schedule, of too few samples)."""

    cores: int | None
    load_start: float | None = None  # the 1-minute load average at the window's start and end
    load_end: float | None = None
    window_s: float = 0.0
    other_busy_cores: float | None = None  # CPU that other processes used over the window, in cores
    own_busy_cores: float | None = None  # CPU that the measuring process used, in cores
    p50_over_min: float | None = None  # the median sample over the fastest
    slow_share: float | None = None  # the share of samples slower than SLOW_FACTOR x the fastest
    samples: int = 0
    missing: dict[str, str] = field(default_factory=dict)
    during: str = "the timed run"  # what the windows were, in the warning's words
    windows: int = 1  # timed windows read (a timing mode's round shares, a sweep length's blocks)

    @property
    def load(self) -> float | None:
        """The higher of the two readings of the load average."""
        loads = [v for v in (self.load_start, self.load_end) if v is not None]
        return max(loads) if loads else None

    @property
    def uncertainty_cores(self) -> float | None:
        """How far the other processes' figure can be off, in cores: CPU_TIMES_SLACK_S per window read, over the
        windows' time."""
        return CPU_TIMES_SLACK_S * max(1, self.windows) / self.window_s if self.window_s > 0 else None

    @property
    def spare_cores(self) -> float | None:
        """The cores neither the measuring process nor the others used over the windows (None where a figure is
        missing)."""
        if not self.cores or self.other_busy_cores is None or self.own_busy_cores is None:
            return None
        return self.cores - self.own_busy_cores - self.other_busy_cores

    @property
    def core_to_spare(self) -> bool:
        """SPARE_CORES or more stayed idle over the windows: whatever else ran (the app among it) had room."""
        spare = self.spare_cores
        return spare is not None and spare >= SPARE_CORES

    @property
    def host_noisy(self) -> bool:
        """Other processes used OTHER_BUSY_CORES or more over the windows, less what the reading may be off by,
        and less than SPARE_CORES was left idle beside them. Where the CPU times could not be read (only there), a
        load average above LOAD_PER_CORE per core."""
        if self.other_busy_cores is not None:  # without the window's length (a record written before it was kept):
            return (self.other_busy_cores - (self.uncertainty_cores or 0.0) >= OTHER_BUSY_CORES  # as read
                    and not self.core_to_spare)
        if "cpu" not in self.missing:
            return False  # no window to judge (none opened): nothing measured, nothing said
        return self.load is not None and bool(self.cores) and self.load > LOAD_PER_CORE * self.cores

    @property
    def samples_noisy(self) -> bool:
        return ((self.p50_over_min is not None and self.p50_over_min >= P50_OVER_MIN)
                or (self.slow_share is not None and self.slow_share >= SLOW_SHARE))

    @property
    def noisy(self) -> bool:
        return self.host_noisy or self.samples_noisy

    def host_text(self) -> str:
        """'load 3.1 on 2 cores, other processes busy on 1.4 of them'."""
        parts = []
        if self.load is not None:
            parts.append(f"load {self.load:.1f}" + (f" on {self.cores} cores" if self.cores else ""))
        if self.other_busy_cores is not None:
            parts.append(f"other processes busy on {self.other_busy_cores:.1f} "
                         + ("of them" if parts else f"of {self.cores} cores" if self.cores else "cores"))
            off = self.uncertainty_cores
            if off is not None and off >= 0.1:  # a short window: the figure is coarse, and said so
                parts[-1] += f" (±{off:.1f} over {_seconds(self.window_s)})"
        return ", ".join(parts) if parts else f"host load n/a ({'; '.join(self.missing.values()) or 'not read'})"

    def warnings(self) -> list[str]:
        """One line per finding, each with its figure; none on a quiet host."""
        return ([f"noisy host: {self.host_text()} during {self.during}"] if self.host_noisy else []) + \
            self.sample_warnings()

    def sample_warnings(self) -> list[str]:
        """The samples' finding alone (an A/B says it per arm, the host once)."""
        lines = []
        if self.samples_noisy:
            if self.p50_over_min is not None and self.p50_over_min >= P50_OVER_MIN:
                lines.append(f"noisy samples: p50 is {self.p50_over_min:.3g}x the fastest sample")
            else:
                lines.append(f"noisy samples: {self.slow_share * 100:.0f} % of them took over "
                             f"{SLOW_FACTOR:g}x the fastest")
        return lines

    def host_only(self, why: str) -> "HostNoise":
        """The host's figures without the samples' spread (`why`: where it is said instead)."""
        return replace(self, p50_over_min=None, slow_share=None, missing={**self.missing, "spread": why})

    def summary(self) -> str:
        """One line of figures, quiet or not: 'load 0.4 on 2 cores, other processes busy on 0.1 of them · p50 1.03x
        the fastest sample, 0 % over 2x'."""
        text = self.host_text()
        if self.p50_over_min is not None:
            text += f" · p50 {self.p50_over_min:.3g}x the fastest sample"
            if self.slow_share is not None:
                text += f", {self.slow_share * 100:.0f} % over {SLOW_FACTOR:g}x"
        return text

    def to_dict(self) -> dict[str, Any]:
        """Every figure, whether it is noisy, and the warnings in words."""
        return {**asdict(self), "load": self.load, "uncertainty_cores": self.uncertainty_cores,
                "host_noisy": self.host_noisy, "samples_noisy": self.samples_noisy, "noisy": self.noisy,
                "warnings": self.warnings()}


def _seconds(s: float) -> str:
    return f"{s * 1000:.0f} ms" if s < 1 else f"{s:.1f} s"


def noise_marks(noise: HostNoise | None) -> list[str]:
    """A HostNoise's warnings, none for None."""
    return noise.warnings() if noise is not None else []


def point_marks(points: Sequence[tuple[str, HostNoise | None]], whole: HostNoise | None = None) -> list[str]:
    """The marks of a measurement with points, one line per finding of each point, the point named first
    ('batch 4 (grow): noisy host: ...'); where no point has one, the whole measurement's (`whole`: over every
    point's windows and what ran between them; a point's own window can be too short to tell)."""
    lines = [f"{label}: {line}" for label, noise in points for line in noise_marks(noise)]
    return lines or noise_marks(whole)


class HostProbe:
    """Reads the host at the two edges of each timed window (a few microseconds each, outside the timer); the
    figures are summed over the windows."""

    def __init__(self, reader: HostReader | None = None, during: str = "the timed run") -> None:
        self.reader = reader if reader is not None else HostReader()
        self.during = during
        self._first: HostReading | None = None  # the first window's start: its load
        self._last: HostReading | None = None  # the last window's end
        self._open: HostReading | None = None  # the window begun and not yet ended
        self._windows = 0
        self._window_s = 0.0
        self._busy_s: float | None = 0.0  # None once a reading could not be taken
        self._own_s: float | None = 0.0

    def _read(self) -> HostReading:
        r = self.reader
        return HostReading(t=r.now(), load=r.load(), busy_s=r.busy_cpu_s(), own_s=r.own_cpu_s())

    def begin(self) -> None:
        """Open a window (one already open is dropped: its end was never read)."""
        self._open = self._read()
        if self._first is None:
            self._first = self._open

    def end(self) -> None:
        """Close the open window and add it to the figures (nothing when none is open)."""
        start, self._open = self._open, None
        if start is None:
            return
        end = self._read()
        self._last = end
        self._windows += 1
        self._window_s += max(0.0, end.t - start.t)
        if None in (start.busy_s, end.busy_s, start.own_s, end.own_s) or self._busy_s is None:
            self._busy_s = self._own_s = None
        else:
            self._busy_s += max(0.0, end.busy_s - start.busy_s)
            self._own_s += max(0.0, end.own_s - start.own_s)

    def summary(self, samples_ms: Sequence[float], spread: bool | str = True) -> HostNoise:
        """The figures over the windows (none if none closed) and of `samples_ms`; `spread` False where the
        samples differ by design (a varying shape schedule): then they say nothing about the host (a str: why
        their spread says nothing, in other words)."""
        missing = dict(getattr(self.reader, "missing", {}) or {})
        other = own = None
        window = self._window_s
        start, end = self._first, self._last
        if self._windows:
            if window > 0 and self._busy_s is not None:
                own = self._own_s / window
                other = max(0.0, self._busy_s / window - own)
                cores = self.reader.cores()
                if cores:  # a tick at each edge of a short window can read as more cores than there are
                    other = min(other, float(cores))
            elif self._busy_s is not None:
                missing.setdefault("window", "the timed window took no measurable time")
        else:
            start = end = None
            missing.setdefault("window", "no timed iteration ran")
        ratio = share = None
        if spread is not True:
            missing["spread"] = spread if isinstance(spread, str) and spread else "the input shape varies by design"
        elif len(samples_ms) < MIN_SPREAD_SAMPLES:
            missing["spread"] = f"{len(samples_ms)} samples, fewer than {MIN_SPREAD_SAMPLES}"
        else:
            ratio, share = p50_over_min(samples_ms), share_above(samples_ms, SLOW_FACTOR)
        return HostNoise(cores=self.reader.cores(), load_start=start.load if start else None,
                         load_end=end.load if end else None, window_s=window, other_busy_cores=other,
                         own_busy_cores=own, p50_over_min=ratio, slow_share=share, samples=len(samples_ms),
                         missing=missing, during=self.during, windows=self._windows)
