"""Per-GPU telemetry as Prometheus metric families, read through the project's one NVML seam.

Names and labels follow NVIDIA's DCGM exporter where the meaning is the same (DCGM_FI_DEV_GPU_UTIL, ..., labels
gpu, UUID, device, modelName, hostname), so dashboards made for it chart these too; what DCGM's exporter does not
publish is under the torchperf_ prefix. The readings the app's telemetry takes (memory, utilisation, temperature,
power, SM clock) come from its `TelemetrySampler`; the rest (memory clock, energy counter, power limit, clock-event
reasons) from `Nvml` directly. A failing query is NA there; here its metric is left out for that GPU and
torchperf_gpu_field_unavailable says which and why, so a scrape never fails for NVML's sake.

No torch and no textual here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from prometheus_client.core import GaugeMetricFamily, Metric

from torchperf_tui.engine.hardware.gpm import GPM_METRICS, NO_GPM, GpmProbe
from torchperf_tui.engine.hardware.nvml import NA, Nvml
from torchperf_tui.engine.hardware.run_conditions import THROTTLE_MASK
from torchperf_tui.engine.hardware.telemetry import GpuSample

MiB = 1024**2
# DCGM's labels of a GPU's metrics, in its order (hostname as its newer releases write it; older ones wrote Hostname).
GPU_LABELS = ("gpu", "UUID", "device", "modelName", "hostname")

# name -> help; all gauges. DCGM's units: MiB, MHz, W, mJ, Celsius, percent.
GPU_METRICS: dict[str, str] = {
    "DCGM_FI_DEV_GPU_UTIL": "GPU utilization (in %).",
    "DCGM_FI_DEV_MEM_COPY_UTIL": "Memory utilization (in %).",
    "DCGM_FI_DEV_FB_USED": "Framebuffer memory used (in MiB).",
    "DCGM_FI_DEV_FB_FREE": "Framebuffer memory free (in MiB).",
    "DCGM_FI_DEV_FB_TOTAL": "Framebuffer memory total (in MiB).",
    "DCGM_FI_DEV_SM_CLOCK": "SM clock frequency (in MHz).",
    "DCGM_FI_DEV_MEM_CLOCK": "Memory clock frequency (in MHz).",
    "DCGM_FI_DEV_GPU_TEMP": "GPU temperature (in C).",
    "DCGM_FI_DEV_POWER_USAGE": "Power draw (in W).",
    "DCGM_FI_DEV_ENFORCED_POWER_LIMIT": "Enforced power limit (in W).",
    # DCGM types it a counter, in the text format where a counter's name need not end in _total; OpenMetrics (which
    # Prometheus asks for first) requires that suffix, and a parser refuses the whole scrape without it. A gauge keeps
    # DCGM's name in both formats, and rate() over it still gives the power.
    "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": "Total energy consumption since the driver loaded (in mJ).",
    "DCGM_FI_DEV_CLOCKS_EVENT_REASONS": "Clock event (throttle) reasons, NVML's bitmask.",
    "torchperf_gpu_throttled": ("1 when a reason that slows a running workload holds the clocks down "
                                "(power cap, thermal, hardware slowdown, power brake)."),
    # DCGM's profiling fields, from NVML's GPM counters between this scrape and the one before (Hopper and later);
    # DCGM gives them as ratios, 0 to 1.
    **{dcgm: f"{words} (ratio, over the time since the last scrape; NVML GPM)." for _, _, words, dcgm in GPM_METRICS},
}
# DCGM exporter's clock_event label values, by NVML's nvmlClocksEventReason* bit.
CLOCK_EVENTS: tuple[tuple[int, str], ...] = (
    (0x1, "gpu_idle"), (0x2, "clocks_setting"), (0x4, "power_cap"), (0x8, "hw_slowdown"), (0x10, "sync_boost"),
    (0x20, "sw_thermal"), (0x40, "hw_thermal"), (0x80, "hw_power_brake"), (0x100, "display_clocks"),
)
CLOCK_EVENT_METRIC = "torchperf_gpu_clock_event"
UNAVAILABLE_METRIC = "torchperf_gpu_field_unavailable"
UP_METRIC = "torchperf_gpu_up"
NVML_METRIC = "torchperf_nvml_available"
# Newer nvidia-ml-py names the query "clocks event reasons"; older releases only have "throttle reasons".
_REASON_QUERIES = ("nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons")


@dataclass
class GpuReading:
    """One GPU at one moment: its labels, the values NVML gave and, for each it did not, the reason."""

    labels: tuple[str, ...]
    values: dict[str, float] = field(default_factory=dict)
    reasons: int | None = None  # the clock-event bitmask, when read
    missing: dict[str, str] = field(default_factory=dict)


class GpuReader:
    """Reads every GPU NVML sees. A GPU's name and UUID are read once (and again while they are NA)."""

    def __init__(self, nvml: Nvml, hostname: str) -> None:
        self.nvml = nvml
        self.hostname = hostname
        self._identity: dict[int, tuple[str, str]] = {}
        self._reason_query: str | None = None
        self._gpm: dict[int, GpmProbe] = {}  # per GPU: its GPM counters, and the sample of the scrape before
        self._gpm_last: dict[int, object] = {}

    def _labels(self, index: int) -> tuple[str, ...]:
        known = self._identity.get(index)
        if known is None:
            uuid = self.nvml.query(index, "nvmlDeviceGetUUID")
            name = self.nvml.query(index, "nvmlDeviceGetName")
            if not isinstance(uuid, NA) and not isinstance(name, NA):
                self._identity[index] = known = (uuid, name)
            else:  # keep asking: a GPU lost at start may come back after a reset
                return (str(index), "" if isinstance(uuid, NA) else uuid, f"nvidia{index}",
                        "" if isinstance(name, NA) else name, self.hostname)
        return (str(index), known[0], f"nvidia{index}", known[1], self.hostname)

    def read(self, samples: list[GpuSample]) -> list[GpuReading]:
        """A reading per GPU, from the telemetry sampler's samples of them and NVML's other queries."""
        return [self._read_one(sample) for sample in samples]

    def _read_one(self, sample: GpuSample) -> GpuReading:
        index = sample.index
        reading = GpuReading(self._labels(index))
        mem_total, mem_used, mem_free = sample.mem_total_bytes, sample.mem_used_bytes, sample.mem_free_bytes
        values: dict[str, Any] = {
            "DCGM_FI_DEV_GPU_UTIL": sample.util_gpu_pct,
            "DCGM_FI_DEV_MEM_COPY_UTIL": sample.util_mem_pct,
            "DCGM_FI_DEV_FB_USED": mem_used if isinstance(mem_used, NA) else mem_used // MiB,
            "DCGM_FI_DEV_FB_FREE": mem_free if isinstance(mem_free, NA) else mem_free // MiB,
            "DCGM_FI_DEV_FB_TOTAL": mem_total if isinstance(mem_total, NA) else mem_total // MiB,
            "DCGM_FI_DEV_SM_CLOCK": sample.sm_clock_mhz,
            "DCGM_FI_DEV_MEM_CLOCK": self.nvml.clock_mhz(index, "NVML_CLOCK_MEM"),
            "DCGM_FI_DEV_GPU_TEMP": sample.temperature_c,
            "DCGM_FI_DEV_POWER_USAGE": sample.power_w,
            "DCGM_FI_DEV_ENFORCED_POWER_LIMIT": _milli(self.nvml.query(index, "nvmlDeviceGetEnforcedPowerLimit")),
            "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": self.nvml.query(index, "nvmlDeviceGetTotalEnergyConsumption"),
        }
        self._read_gpm(index, reading)
        reasons = self._reasons(index)
        values["DCGM_FI_DEV_CLOCKS_EVENT_REASONS"] = reasons
        if not isinstance(reasons, NA):
            reading.reasons = int(reasons)
            values["torchperf_gpu_throttled"] = 1 if reasons & THROTTLE_MASK else 0
        for name, value in values.items():
            if isinstance(value, NA):
                reading.missing[name] = value.reason
            else:
                reading.values[name] = float(value)
        return reading

    def _read_gpm(self, index: int, reading: GpuReading) -> None:
        """The GPM counters between the scrape before and this one (none at the first). A GPU that has none (before
        Hopper) serves none, as DCGM's exporter does; one whose counters fail says so as one field, "gpm"."""
        probe = self._gpm.get(index)
        if probe is None:
            probe = self._gpm[index] = GpmProbe(self.nvml, index)
        if not probe.available:
            if probe.missing != NO_GPM:
                reading.missing["gpm"] = probe.missing or "not read"
            return
        sample = probe.sample()
        before = self._gpm_last.pop(index, None)
        if sample is not None:
            self._gpm_last[index] = sample
        metrics = probe.between(before, sample, free=False) if before is not None else {}
        probe.free(before)
        for name, _, _, dcgm in GPM_METRICS:
            if name in metrics:
                reading.values[dcgm] = metrics[name] / 100.0

    def _reasons(self, index: int) -> int | NA:
        if self._reason_query is not None:
            return self.nvml.query(index, self._reason_query)
        answers = []
        for query in _REASON_QUERIES:  # whichever name this nvidia-ml-py has
            value = self.nvml.query(index, query)
            if not isinstance(value, NA):
                self._reason_query = query
                return value
            answers.append(value)
        return answers[0]  # the newer query's reason (GPU lost, not supported), not the older one's absence


def _milli(value: int | NA) -> float | NA:
    return value if isinstance(value, NA) else value / 1000.0


def gpu_families(nvml: Nvml, readings: list[GpuReading], hostname: str) -> list[Metric]:
    """The metric families of the GPUs' readings: one series per GPU for each value it gave."""
    families: list[Metric] = []
    for name, text in GPU_METRICS.items():
        family = GaugeMetricFamily(name, text, labels=GPU_LABELS)
        for reading in readings:
            if name in reading.values:
                family.add_metric(list(reading.labels), reading.values[name])
        families.append(family)
    events = GaugeMetricFamily(CLOCK_EVENT_METRIC, "1 while this clock event reason holds (DCGM exporter's "
                               "clock_event names).", labels=(*GPU_LABELS, "clock_event"))
    up = GaugeMetricFamily(UP_METRIC, "1 when NVML answered at least one query of this GPU, 0 when none (a GPU "
                           "lost from the bus, a driver gone).", labels=GPU_LABELS)
    missing = GaugeMetricFamily(UNAVAILABLE_METRIC, "1 for each metric NVML could not give for this GPU at the last "
                                "reading, with NVML's reason; the metric itself is left out.",
                                labels=(*GPU_LABELS, "field", "reason"))
    for reading in readings:
        if reading.reasons is not None:
            for bit, event in CLOCK_EVENTS:
                events.add_metric([*reading.labels, event], 1 if reading.reasons & bit else 0)
        up.add_metric(list(reading.labels), 1 if reading.values else 0)
        for name, reason in sorted(reading.missing.items()):
            missing.add_metric([*reading.labels, name, reason], 1)
    available = GaugeMetricFamily(NVML_METRIC, "1 when NVML is loaded and answers, 0 on a box without it (a CPU "
                                  "box, a driver missing); reason says why.", labels=("hostname", "reason"))
    available.add_metric([hostname, "" if nvml.available else (nvml.reason or "NVML not available")],
                         1 if nvml.available else 0)
    return [*families, events, up, missing, available]
