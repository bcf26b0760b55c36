"""The host's CPU and memory as Prometheus metric families: what a CPU box has to show beside its outcomes, and
what a GPU box's CPU-bound runs depend on. psutil and os only; a value the OS will not give is left out.

No torch and no textual here.
"""

from __future__ import annotations

import os
from typing import Any

import psutil
from prometheus_client.core import GaugeMetricFamily, Metric

from torchperf_tui.engine.hardware.nvml import NA

HOST_METRICS: dict[str, str] = {
    "torchperf_host_cpu_utilization_percent": "CPU utilisation over all logical CPUs since the last reading (in %).",
    "torchperf_host_cpu_count": "Logical CPUs of the host.",
    "torchperf_host_load1": "Load average over 1 minute.",
    "torchperf_host_load5": "Load average over 5 minutes.",
    "torchperf_host_load15": "Load average over 15 minutes.",
    "torchperf_host_memory_used_bytes": "Memory other programs cannot have: total less available (in bytes).",
    "torchperf_host_memory_total_bytes": "Physical memory of the host (in bytes).",
}


def read_host(ram: tuple[Any, Any]) -> dict[str, float]:
    """The host's figures now; `ram` is (used, total) as the app's telemetry read them (NA when unreadable)."""
    values: dict[str, float] = {}
    try:
        # Since the previous call (the previous reading): the exporter reads at its interval, so this is the
        # utilisation over that interval. The very first call has nothing to compare with and answers 0.
        values["torchperf_host_cpu_utilization_percent"] = float(psutil.cpu_percent(interval=None))
    except Exception:
        pass
    values["torchperf_host_cpu_count"] = float(psutil.cpu_count() or os.cpu_count() or 1)
    try:
        load = os.getloadavg()
    except (AttributeError, OSError):  # Windows has none
        load = None
    if load is not None:
        for name, value in zip(("torchperf_host_load1", "torchperf_host_load5", "torchperf_host_load15"), load):
            values[name] = float(value)
    used, total = ram
    if not isinstance(used, NA):
        values["torchperf_host_memory_used_bytes"] = float(used)
    if not isinstance(total, NA):
        values["torchperf_host_memory_total_bytes"] = float(total)
    return values


def host_families(values: dict[str, float], hostname: str) -> list[Metric]:
    families: list[Metric] = []
    for name, text in HOST_METRICS.items():
        family = GaugeMetricFamily(name, text, labels=("hostname",))
        if name in values:
            family.add_metric([hostname], values[name])
        families.append(family)
    return families
