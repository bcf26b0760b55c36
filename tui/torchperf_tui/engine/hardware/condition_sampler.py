"""Reading the GPU beside a timed run: a `ConditionSampler` reads NVML between two timed iterations (outside the
timer, like the memory trace) once `period_s` has passed since its last reading, about ten times a second, and
once at each edge of a timed window; `summary()` sums the readings up as engine/run_conditions.RunConditions.

Not a thread of its own: its Python would take the GIL from the thread launching kernels, in the middle of a
timed iteration of a launch-bound model. Readings between iterations see the GPU a moment after its work: its
clocks and power limiter do not change in that moment (and NVML's power is a ~1 s average).

No torch (but in `conditions_sampler`, for a CUDA device's index) and no textual here, only NVML through
engine/hardware/nvml.py: tests drive it with the fake NVML module.
"""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Callable

from torchperf_tui.engine.hardware.gpm import GpmProbe
from torchperf_tui.engine.hardware.gpu_tenants import TenantWatch, sharing_mode
from torchperf_tui.engine.hardware.nvml import default_nvml, NA, Nvml, pcie_link
from torchperf_tui.engine.hardware.run_conditions import CLOCK_EVENT_REASONS, DEFAULT_PERIOD_S, THROTTLE_MASK, RunConditions
from torchperf_tui.engine.hardware.device import TorchCudaBackend, nvml_index_for

READINGS_LIMIT = 4000  # past this, every other reading is dropped (window edges are kept apart)
# Newer nvidia-ml-py names the query "clocks event reasons"; older releases only have "throttle reasons".
_REASON_QUERIES = ("nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons")


@dataclass(frozen=True)
class ConditionReading:
    """One reading; None where NVML could not say (the sampler keeps why)."""

    t: float  # time.perf_counter() seconds
    sm_mhz: int | None = None
    mem_mhz: int | None = None
    reasons: int | None = None  # the clock-event reason bits
    temperature_c: int | None = None
    power_w: float | None = None
    energy_mj: int | None = None  # NVML's total energy counter


class ConditionSampler:
    """Reads NVML for one GPU beside a run: at `begin()` / `end()` of each timed window (so the energy counter is
    read exactly at its edges) and at `tick()`, which the timed loop calls between iterations, once `period_s`
    has passed (None: only the edges). Thread-safe: A/B arms open and close windows from their own threads."""

    def __init__(self, nvml: Nvml | None, index: int | None, period_s: float | None = DEFAULT_PERIOD_S,
                 clock: Callable[[], float] = time.perf_counter, unavailable: str | None = None) -> None:
        self.nvml, self.index, self.period_s, self._clock = nvml, index, period_s, clock
        self._lock = threading.Lock()
        self._readings: list[ConditionReading] = []
        self._windows: list[tuple[str, ConditionReading, ConditionReading]] = []
        self._open: dict[str, ConditionReading] = {}
        self._missing: dict[str, str] = {}
        self._last_t = float("-inf")
        if unavailable is not None or nvml is None or index is None:
            self._missing["nvml"] = unavailable or "NVML not available"
            self.index = None
        self._reason_query: str | None = None
        self.max_sm_mhz: int | None = None
        # The GPM counters over each window: a sample at each edge (engine/hardware/gpm.py); where the GPU has none,
        # said once among what could not be read.
        self._gpm: GpmProbe | None = None
        self._gpm_open: dict[str, Any] = {}
        self._gpm_windows: list[tuple[str, float, dict[str, float]]] = []  # (label, seconds, metrics)
        self._tenants: TenantWatch | None = None  # the GPU's other processes, read at each window edge
        self._pcie: str | None = None  # the PCIe link, read as the first window opens (under load)
        if self.index is not None:
            self._tenants = TenantWatch(nvml, self.index)
            top = nvml.clock_mhz(self.index, "NVML_CLOCK_SM", maximum=True)
            self.max_sm_mhz = None if isinstance(top, NA) else int(top)
            self._gpm = GpmProbe(nvml, self.index)
            if not self._gpm.available:
                self._missing["gpm"] = self._gpm.missing

    @classmethod
    def unavailable(cls, reason: str) -> ConditionSampler:
        """A sampler that reads nothing and says why (no NVML, a CUDA device NVML cannot match)."""
        return cls(None, None, period_s=None, unavailable=reason)

    # -- reading ------------------------------------------------------------------------------------------
    def _value(self, key: str, value: Any) -> Any:
        if isinstance(value, NA):
            with self._lock:
                self._missing.setdefault(key, value.reason)
            return None
        return value

    def _reasons(self) -> int | None:
        if self._reason_query is None:  # whichever name this nvidia-ml-py has
            module = self.nvml.module
            self._reason_query = next((name for name in _REASON_QUERIES if hasattr(module, name)), _REASON_QUERIES[0])
        return self._value("reasons", self.nvml.query(self.index, self._reason_query))

    def read(self) -> ConditionReading:
        """One reading now (every field NVML answers; what it does not is remembered with its reason)."""
        t = self._clock()
        if self.index is None:
            return ConditionReading(t=t)
        nvml, index = self.nvml, self.index
        return ConditionReading(
            t=t,
            sm_mhz=self._value("sm_clock", nvml.clock_mhz(index, "NVML_CLOCK_SM")),
            mem_mhz=self._value("mem_clock", nvml.clock_mhz(index, "NVML_CLOCK_MEM")),
            reasons=self._reasons(),
            temperature_c=self._value("temperature", nvml.temperature_c(index)),
            power_w=self._value("power", nvml.power_w(index)),
            energy_mj=self._value("energy", nvml.query(index, "nvmlDeviceGetTotalEnergyConsumption")),
        )

    def _keep(self, reading: ConditionReading) -> None:
        with self._lock:
            if len(self._readings) >= READINGS_LIMIT:
                self._readings = self._readings[::2]
            self._readings.append(reading)
            self._last_t = reading.t

    def sample(self) -> None:
        """Take and keep one reading now."""
        if self.index is not None:
            self._keep(self.read())

    def tick(self) -> None:
        """Between two timed iterations, outside the timer: a reading if `period_s` has passed since the last."""
        if self.index is None or self.period_s is None:
            return
        if self._clock() - self._last_t >= self.period_s:
            self.sample()

    # -- windows ------------------------------------------------------------------------------------------
    def begin(self, label: str) -> None:
        """A timed window of `label` opens now (a run's timed iterations, one A/B block, a mode's share)."""
        reading = self.read()
        sample = self._gpm.sample() if self._gpm is not None else None
        self._read_tenants()
        if self._pcie is None and self.index is not None:
            link = pcie_link(self.nvml, self.index)
            self._pcie = "" if isinstance(link, NA) else link
            if isinstance(link, NA):
                with self._lock:
                    self._missing.setdefault("pcie", link.reason)
        with self._lock:
            self._open[label] = reading
            self._last_t = reading.t
            if sample is not None:
                self._gpm.free(self._gpm_open.pop(label, None))
                self._gpm_open[label] = sample

    def end(self, label: str) -> None:
        """The window of `label` closes now; a label with no open window is ignored (and costs no reading)."""
        with self._lock:
            if label not in self._open:
                return
        reading = self.read()
        self._read_tenants()
        with self._lock:
            first = self._gpm_open.pop(label, None)
        if first is not None:
            metrics = self._gpm.between(first, self._gpm.sample())
            if not metrics and self._gpm.missing:
                with self._lock:
                    self._missing.setdefault("gpm", self._gpm.missing)
        with self._lock:
            start = self._open.pop(label, None)
            if start is not None:
                self._windows.append((label, start, reading))
                if first is not None and metrics:
                    self._gpm_windows.append((label, reading.t - start.t, metrics))
            self._last_t = reading.t

    def _read_tenants(self) -> None:
        if self._tenants is not None:
            with self._lock:  # A/B arms open and close windows from their own threads
                self._tenants.read()

    def discard(self, label: str) -> None:
        """Forget the open window of `label` (a block cancelled before it was complete)."""
        with self._lock:
            self._open.pop(label, None)
            first = self._gpm_open.pop(label, None)
        if first is not None:
            self._gpm.free(first)

    def before_timed(self, label: str, index: int) -> None:
        """Before timed iteration `index` of window `label`, outside the timer: the first opens the window, the
        others tick. What every timed loop calls from its before-iteration hook."""
        if index == 0:
            self.begin(label)
        else:
            self.tick()

    def close(self, label: str, keep: bool = True) -> None:
        """After the timed iterations of `label`: end its window, or (`keep` False: a cancelled block whose
        samples are dropped) discard it."""
        if keep:
            self.end(label)
        else:
            self.discard(label)

    # -- the summary --------------------------------------------------------------------------------------
    def summary(self, labels: str | Iterable[str], items: int) -> RunConditions:
        """The conditions over every closed window of `labels` (one label or several), with `items`
        inferences (or training samples) in them."""
        wanted = {labels} if isinstance(labels, str) else set(labels)
        with self._lock:
            missing = dict(self._missing)
        if self.index is None:
            return RunConditions(gpu_index=None, period_s=self.period_s, items=items, missing=missing)
        with self._lock:
            windows = [(start, end) for name, start, end in self._windows if name in wanted]
            inside = [r for r in self._readings if any(start.t <= r.t <= end.t for start, end in windows)]
        readings = sorted([*inside, *(edge for window in windows for edge in window)], key=lambda r: r.t)
        lengths = [end.t - start.t for start, end in windows]
        window_s = sum(lengths)
        sm = [r.sm_mhz for r in readings if r.sm_mhz is not None]
        mem = [r.mem_mhz for r in readings if r.mem_mhz is not None]
        temps = [r.temperature_c for r in readings if r.temperature_c is not None]
        power = [r.power_w for r in readings if r.power_w is not None]
        masks = [r.reasons for r in readings if r.reasons is not None]
        reasons: dict[str, float] = {}
        for bit, words, _ in CLOCK_EVENT_REASONS:
            active = sum(1 for mask in masks if mask & bit)
            if active:
                reasons[words] = active / len(masks)
        throttled = sum(1 for mask in masks if mask & THROTTLE_MASK) / len(masks) if masks else None
        energy_j, method = self._energy(windows, power, window_s, missing)
        with self._lock:
            counted = [(seconds, metrics) for name, seconds, metrics in self._gpm_windows if name in wanted]
        gpm = _weighted(counted)
        if not windows:
            missing["window"] = "no timed window closed (the run was cancelled before its timed iterations)"
        with self._lock:
            tenants = self._tenants.tenants() if self._tenants is not None else []
            if self._tenants is not None and self._tenants.missing:
                missing.setdefault("processes", self._tenants.missing)
        return RunConditions(
            tenants=tenants, sharing=sharing_mode(self.nvml, self.index, tenants), pcie=self._pcie or "",
            gpu_index=self.index, readings=len(readings), window_s=window_s, windows=len(lengths),
            window_median_s=statistics.median(lengths) if lengths else 0.0, period_s=self.period_s,
            sm_clock_mhz=statistics.median(sm) if sm else None, sm_clock_min_mhz=min(sm) if sm else None,
            sm_clock_max_mhz=self.max_sm_mhz, mem_clock_mhz=statistics.median(mem) if mem else None,
            temperature_start_c=temps[0] if temps else None, temperature_max_c=max(temps) if temps else None,
            power_mean_w=statistics.fmean(power) if power else None, power_max_w=max(power) if power else None,
            reasons=reasons, throttled_share=throttled, energy_j=energy_j, energy_method=method, items=items,
            missing=missing, gpm=gpm,
        )

    @staticmethod
    def _energy(windows, power: list[float], window_s: float, missing: dict[str, str]) -> tuple[float | None, str]:
        if not windows or window_s <= 0:
            missing.setdefault("energy", "no timed window")
            return None, ""
        if all(start.energy_mj is not None and end.energy_mj is not None for start, end in windows):
            total_mj = sum(end.energy_mj - start.energy_mj for start, end in windows)
            if total_mj > 0:
                return total_mj / 1000.0, "NVML energy counter across the timed iterations, gaps included"
            missing.setdefault("energy", "the energy counter did not move over the timed iterations")
        if power:
            why = missing.get("energy", "no energy counter")
            return (statistics.fmean(power) * window_s,
                    f"mean NVML power x wall time of the timed iterations ({why})")
        missing.setdefault("energy", "neither the energy counter nor the power could be read")
        return None, ""


def conditions_sampler(device: Any, period_s: float | None = DEFAULT_PERIOD_S) -> ConditionSampler | None:
    """The sampler for a run on torch device `device`: None on the CPU; on CUDA, NVML's view of that GPU
    (matched by UUID, see device.nvml_index_for), or a sampler that says why it reads nothing."""
    if getattr(device, "type", str(device)) != "cuda":
        return None
    nvml = default_nvml()
    if not nvml.available:
        return ConditionSampler.unavailable(nvml.reason or "NVML not available")
    cuda = TorchCudaBackend()
    index = device.index if device.index is not None else _current_cuda_index()
    nvml_index = nvml_index_for(nvml, cuda, index)
    if isinstance(nvml_index, NA):
        return ConditionSampler.unavailable(nvml_index.reason)
    return ConditionSampler(nvml, nvml_index, period_s=period_s)


def _current_cuda_index() -> int:
    import torch

    return torch.cuda.current_device()


def _weighted(windows: list[tuple[float, dict[str, float]]]) -> dict[str, float]:
    """Each GPM metric over several windows: their values weighted by the windows' lengths."""
    out: dict[str, float] = {}
    for name in dict.fromkeys(name for _, metrics in windows for name in metrics):
        pairs = [(seconds, metrics[name]) for seconds, metrics in windows if name in metrics]
        total = sum(seconds for seconds, _ in pairs)
        out[name] = (sum(seconds * value for seconds, value in pairs) / total if total > 0
                     else sum(value for _, value in pairs) / len(pairs))
    return out
