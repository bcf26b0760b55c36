"""The GPU's own counters over a window, through NVML's GPM interface (GPU Performance Monitoring: Hopper and later):
the share of time its SMs were active, their warp occupancy, the tensor pipes' activity and the DRAM bandwidth used.
NVML's utilisation says only whether some kernel ran in a sample period (a single small kernel reads 100 %); these are
the counters DCGM's profiling fields and nvtop read instead.

GPM gives metrics between two samples: one is taken at each edge of a window and NVML computes each metric over the
time between them. Where the device has none (before Hopper, a driver or nvidia-ml-py without it, no NVML), the probe
says why, once. No torch and no textual here, only NVML through engine/hardware/nvml.py (tests drive it with the fake
NVML module).
"""

from __future__ import annotations

from typing import Any

from torchperf_tui.engine.hardware.nvml import NA, Nvml

# (name, NVML_GPM_METRIC_* id, words, DCGM's profiling field of the same meaning); every value is a percentage.
GPM_METRICS: tuple[tuple[str, int, str, str], ...] = (
    ("sm_active", 2, "SM active", "DCGM_FI_PROF_SM_ACTIVE"),
    ("sm_occupancy", 3, "occupancy", "DCGM_FI_PROF_SM_OCCUPANCY"),
    ("tensor_active", 5, "tensor", "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"),
    ("dram_active", 10, "DRAM", "DCGM_FI_PROF_DRAM_ACTIVE"),
)
NO_GPM = "this GPU has no GPM counters (Hopper and later have them)"


def gpm_text(metrics: dict[str, float]) -> str:
    """'SM active 87 % · occupancy 41 % · tensor 62 % · DRAM 35 %' (those read), '' for none."""
    return " · ".join(f"{words} {metrics[name]:.0f} %" for name, _, words, _ in GPM_METRICS if name in metrics)


class GpmProbe:
    """Samples the GPM counters of one GPU and reads the metrics between two samples."""

    def __init__(self, nvml: Nvml | None, index: int | None) -> None:
        self.nvml, self.index = nvml, index
        self.missing: str | None = None
        if nvml is None or index is None:
            self.missing = "NVML not available"
            return
        if not hasattr(nvml.module, "nvmlGpmSampleGet"):
            self.missing = "this nvidia-ml-py has no GPM functions"
            return
        support = nvml.query(index, "nvmlGpmQueryDeviceSupport")
        if isinstance(support, NA):
            self.missing = support.reason
        elif not support.isSupportedDevice:
            self.missing = NO_GPM

    @property
    def available(self) -> bool:
        return self.missing is None

    def sample(self) -> Any | None:
        """A GPM sample of the GPU now (None where it has none, or NVML failed: then `missing` says why)."""
        if not self.available:
            return None
        sample = self.nvml.query_system("nvmlGpmSampleAlloc")
        if isinstance(sample, NA):
            self.missing = sample.reason
            return None
        got = self.nvml.query(self.index, "nvmlGpmSampleGet", sample)
        if isinstance(got, NA):
            self.free(sample)
            self.missing = got.reason
            return None
        return sample

    def free(self, *samples: Any) -> None:
        for sample in samples:
            if sample is not None:
                self.nvml.query_system("nvmlGpmSampleFree", sample)

    def between(self, first: Any, second: Any, free: bool = True) -> dict[str, float]:
        """Each metric NVML computes between two samples, in percent ({} when it could not); the samples are freed
        unless `free` is False (the exporter keeps the second for its next scrape)."""
        try:
            if first is None or second is None:
                return {}
            module = self.nvml.module
            request = module.c_nvmlGpmMetricsGet_t()
            request.version = module.NVML_GPM_METRICS_GET_VERSION
            request.numMetrics = len(GPM_METRICS)
            request.sample1, request.sample2 = first, second
            for slot, (_, metric, _, _) in enumerate(GPM_METRICS):
                request.metrics[slot].metricId = metric
            answer = self.nvml.query_system("nvmlGpmMetricsGet", request)
            if isinstance(answer, NA):
                self.missing = answer.reason
                return {}
            values = {}
            for slot, (name, _, _, _) in enumerate(GPM_METRICS):
                metric = answer.metrics[slot]
                value = float(metric.value)
                if metric.nvmlReturn == 0 and 0.0 <= value <= 100.0:  # a percentage, or not a reading
                    values[name] = value
            return values
        finally:
            if free:
                self.free(first, second)
