"""Run records in the formats fleets already ingest: github-action-benchmark's custom JSON and rows of the PyTorch
OSS benchmark database's v3 schema (engine/records/export_pytorch_v3.py). What both need of a record (the name of
its set-up, like for like, and its figures as plain finite numbers) is engine/records/fleet_records.py.

github-action-benchmark (`tool: customSmallerIsBetter` / `customBiggerIsBetter`) reads a JSON array of
{name, unit, value, range?, extra?}; one file holds one direction, so `--format github-benchmark` writes the
latencies (smaller is better) and `--metric throughput` the rates (bigger is better). The action charts by name:
a name is the run's set-up (model and its overrides, input, dtype, step, compile, quantization, attention, KV cache,
flags, device) and nothing that changes from run to run (no id, no host, no date), so the points of one set-up join
up across commits and two set-ups never share a chart. One entry per set-up and statistic: the newest record of each
set-up.

No torch here: `export` reads the history without it.
"""

from __future__ import annotations

from typing import Any, Iterable

from torchperf_tui.core.errors import TorchperfError
from torchperf_tui.core.options import EXPORT_METRICS
from torchperf_tui.engine.records.export_pytorch_v3 import pytorch_v3_rows
from torchperf_tui.engine.records.fleet_records import (GITHUB_BENCHMARK, LatencyFamily, clean_text, exported,
                                                        latency_families, rate, setup_name, to_json)
from torchperf_tui.engine.records.history_records import HistoryRecord


def _ms(value: float) -> str:
    return f"{value:.4g} ms"


def _extra(record: HistoryRecord, family: LatencyFamily | None) -> str:
    """What a point's tooltip says beyond its value: the other statistics, and the run it came from."""
    parts = []
    if family is not None:
        parts += [f"{name} {_ms(v)}" for name, v in (("p90", family.p90_ms), ("p99", family.p99_ms),
                                                      ("mean", family.mean_ms)) if v is not None]
        parts.append(f"n={family.n}")
        if family.iqr_ms is not None:
            parts.append("range: ± half the interquartile range")
    run = [f"record {clean_text(record.id, 40)}", f"at {clean_text(record.created_at, 40)}"]
    host = clean_text(record.fingerprint.get("hostname"), 60)
    if host:
        run.append(f"on {host}")
    torch = clean_text(record.fingerprint.get("torch"), 40)
    if torch:
        run.append(f"torch {torch}")
    lines = ["; ".join(parts), " ".join(run)]
    if record.disturbed:
        lines.append("disturbed: " + clean_text(record.disturbed_text(), 300))
    return "\n".join(line for line in lines if line)


def github_benchmark_entries(records: Iterable[HistoryRecord], metric: str = "latency") -> list[dict[str, Any]]:
    """github-action-benchmark's custom entries: `latency` the p50 of each latency (ms, customSmallerIsBetter),
    `throughput` samples/s or tokens/s (customBiggerIsBetter). The newest record of each set-up; cancelled runs
    and figures that are not finite are left out."""
    if metric not in EXPORT_METRICS:
        raise TorchperfError(f"unknown export metric {metric!r}: choose one of {', '.join(EXPORT_METRICS)}")
    newest: dict[str, dict[str, Any]] = {}
    for record in exported(records):
        setup = setup_name(record)
        if metric == "latency":
            for family in latency_families(record):
                name = f"{setup} - {family.label + ' ' if family.label else ''}p50"
                entry = {"name": name, "unit": "ms", "value": family.p50_ms}
                if family.iqr_ms is not None:
                    entry["range"] = f"± {family.iqr_ms / 2:.4g}"
                entry["extra"] = _extra(record, family)
                newest.pop(name, None)  # a later run of the set-up replaces it, and goes where it ran
                newest[name] = entry
        else:
            figure = rate(record)
            if figure is not None:
                name = f"{setup} - {figure.unit}" + (" at p50" if figure.key == "samples_per_s" else "")
                newest.pop(name, None)
                newest[name] = {"name": name, "unit": figure.unit, "value": figure.value,
                                "extra": _extra(record, None)}
    return list(newest.values())


def export_fleet(records: Iterable[HistoryRecord], fmt: str, metric: str | None = None) -> str:
    """The records as `github-benchmark` (with `metric` latency, the default, or throughput) or `pytorch-v3`."""
    if fmt == GITHUB_BENCHMARK:
        return to_json(github_benchmark_entries(records, metric or "latency"))
    if metric is not None:
        raise TorchperfError(f"--metric chooses github-benchmark's file (latency or throughput); "
                             f"{fmt} carries every metric")
    return to_json(pytorch_v3_rows(records))
