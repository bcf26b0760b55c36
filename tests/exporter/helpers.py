"""What the exporter tests share: crafted history records, a served exporter and a real scrape of it."""

from __future__ import annotations

import contextlib
import json
import urllib.request
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from tests.fakes.fake_nvml import FakeGpu, FakeNvml, GiB
from torchperf_tui.core.stats import TimingStats
from torchperf_tui.engine.hardware.nvml import Nvml
from torchperf_tui.engine.records.history_file import HistoryFile
from torchperf_tui.engine.records.history_records import HistoryRecord, new_record_id
from torchperf_tui.exporter.server import ExporterState, serve


def two_gpus() -> FakeNvml:
    """An H100 at work against its power cap and an idle A100."""
    return FakeNvml(gpus=[
        FakeGpu(uuid="GPU-aaaa", util_gpu=87, util_mem=40, memory_used=10 * GiB, power_mw=312_500, sm_clock_mhz=1755,
                mem_clock_mhz=2619, temperature_c=64, energy_mj=5_000_000, clock_event_reasons=0x4),
        FakeGpu(uuid="GPU-bbbb", name="NVIDIA A100-SXM4-40GB", util_gpu=3, memory_total=40 * 1024 * 1024**2,
                clock_event_reasons=0x1),
    ])


def record(model: str = "resnet18", p50: float = 10.0, *, dtype: str = "float32", flags_text: str = "defaults",
           host: str = "box-a", energy_j: float | None = None, created: str = "2026-11-22T20:30:00+00:00",
           kind: str = "timing", details: dict | None = None) -> HistoryRecord:
    """A record whose figures are given outright: p90 = p50 + 2, p99 = p50 + 10, fps 1000 / p50 at batch 1."""
    stats = TimingStats(n=64, mean_ms=p50, std_ms=0.5, min_ms=p50 - 1, max_ms=p50 + 12, p50_ms=p50,
                        p90_ms=p50 + 2, p99_ms=p50 + 10, iqr_ms=1.0, fps=1000.0 / p50)
    fingerprint: dict = {"hostname": host, "device_name": "NVIDIA H100 80GB HBM3"}
    if energy_j is not None:
        fingerprint["gpu_energy_per_item_j"] = energy_j
    return HistoryRecord(id=new_record_id(), kind=kind, created_at=created, model=model, input_shape=(1, 3, 224, 224),
                         dtype=dtype, channels_last=False, device="cuda:0", flags={}, flags_text=flags_text,
                         stats=stats, samples_ms=[p50] * 4, fingerprint=fingerprint, duration_s=1.0,
                         timer="cuda-events", details=dict(details or {}))


def write_history(path: Path, *records: HistoryRecord, junk: str | None = None) -> None:
    """Append the records (and a junk line after them, if given) to the history at `path`."""
    HistoryFile(path).extend(records)
    if junk is not None:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(junk + "\n")


@contextlib.contextmanager
def served(nvml: Nvml, history: Path, warnings: list[str] | None = None, hostname: str = "box-a"):
    """An exporter on 127.0.0.1 at a free port, its first reading taken: yields (state, /metrics URL)."""
    state = ExporterState(nvml, HistoryFile(history), hostname=hostname,
                          warn=(warnings.append if warnings is not None else lambda line: None))
    state.refresh(strict=True)
    server, thread = serve(state, "127.0.0.1", 0)
    try:
        yield state, f"http://127.0.0.1:{server.server_port}/metrics"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def scrape(url: str) -> dict[str, list]:
    """GET the URL with urllib and parse it with prometheus-client's parser: sample name -> its samples."""
    with urllib.request.urlopen(url, timeout=10) as response:
        assert response.status == 200
        return by_name(text_string_to_metric_families(response.read().decode("utf-8")))


def by_name(families) -> dict[str, list]:
    """Parsed metric families' samples by sample name."""
    samples: dict[str, list] = {}
    for family in families:
        for sample in family.samples:
            samples.setdefault(sample.name, []).append(sample)
    return samples


# What a Prometheus server asks for first: OpenMetrics, whose parser is strict (a counter without _total, a name
# clash or a duplicate series refuses the whole scrape).
OPENMETRICS_ACCEPT = "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5"


def scrape_openmetrics(url: str) -> dict[str, list]:
    """GET the URL as Prometheus does and parse it with prometheus-client's OpenMetrics parser."""
    from prometheus_client.openmetrics.parser import text_string_to_metric_families as openmetrics_families

    request = urllib.request.Request(url, headers={"Accept": OPENMETRICS_ACCEPT})
    with urllib.request.urlopen(request, timeout=10) as response:
        assert response.headers["Content-Type"].startswith("application/openmetrics-text")
        return by_name(openmetrics_families(response.read().decode("utf-8")))


def value(samples: dict[str, list], name: str, **labels: str) -> float:
    """The one sample of `name` whose labels include `labels`."""
    found = [s for s in samples.get(name, []) if all(s.labels.get(k) == v for k, v in labels.items())]
    assert len(found) == 1, (name, labels, samples.get(name))
    return found[0].value


def dumps(data: object) -> str:
    return json.dumps(data)
