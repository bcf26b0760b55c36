"""Run records as text to hand on: JSON (full records), CSV (one row per run) or a Markdown table."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import math
from typing import Any, Iterable

from torchperf_tui.engine.errors import TorchperfError
from torchperf_tui.options import EXPORT_FORMATS
from torchperf_tui.engine.records.history_records import HistoryRecord
from torchperf_tui.engine.benchmark.stats import TimingStats
from torchperf_tui.engine.benchmark.stats import percentile_supported
from torchperf_tui.formatting import UNSUPPORTED_LEGEND, format_ms, format_percentile


STATS_COLUMNS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(TimingStats))
CSV_BASE_COLUMNS: tuple[str, ...] = ("id", "kind", "created_at", "model", "source", "model_args", "input_shape",
                                     "seq_len", "inputs", "batch", "dtype", "channels_last", "device", "cancelled",
                                     "duration_s", "timer", "compile_mode", "flags_text")


def _union_keys(dicts: Iterable[dict[str, Any]]) -> list[str]:
    keys: dict[str, None] = {}
    for d in dicts:
        keys.update(dict.fromkeys(d))
    return list(keys)


def _csv_value(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, float) and not math.isfinite(value):
        return ""
    return value


def _export_csv(records: list[HistoryRecord]) -> str:
    flag_keys = _union_keys(r.flags for r in records)
    env_keys = _union_keys(r.fingerprint for r in records)
    columns = [*CSV_BASE_COLUMNS, *STATS_COLUMNS, *(f"flag.{k}" for k in flag_keys),
               *(f"env.{k}" for k in env_keys)]
    out = io.StringIO()
    # "\n" rather than csv's default "\r\n": the text goes to stdout or a text-mode file.
    writer = csv.DictWriter(out, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    for r in records:
        row: dict[str, Any] = {
            "id": r.id, "kind": r.kind, "created_at": r.created_at, "model": r.model,
            "source": r.details.get("source", ""), "model_args": r.details.get("model_args", ""),
            "input_shape": r.shape_text, "seq_len": r.details.get("seq_len"), "inputs": r.details.get("inputs", ""),
            "batch": r.batch, "dtype": r.dtype, "channels_last": r.channels_last,
            "device": r.device, "cancelled": r.cancelled, "duration_s": r.duration_s, "timer": r.timer,
            "compile_mode": r.details.get("compile_mode"), "flags_text": r.flags_text,
        }
        stats = dataclasses.asdict(r.stats) if r.stats is not None else {}
        row.update({k: stats.get(k) for k in STATS_COLUMNS})
        row.update({f"flag.{k}": r.flags.get(k) for k in flag_keys})
        row.update({f"env.{k}": r.fingerprint.get(k) for k in env_keys})
        writer.writerow({k: _csv_value(v) for k, v in row.items()})
    return out.getvalue()


MD_COLUMNS: tuple[str, ...] = ("When (UTC)", "ID", "Model", "Input", "dtype", "Device", "Flags", "p50", "p90",
                               "p99", "Mean ± std", "Items/s (mean)", "First iter", "Device name")


def _md_cell(value: Any) -> str:
    return str(value).replace("|", "\\|").replace("\n", " ")


def _export_md(records: list[HistoryRecord]) -> str:
    lines = ["| " + " | ".join(MD_COLUMNS) + " |", "|" + "|".join("---" for _ in MD_COLUMNS) + "|"]
    for r in records:
        s = r.stats
        layout = " channels_last" if r.channels_last else ""
        if s is None:
            numbers = ["-"] * 6
        else:
            numbers = [format_percentile(s.p50_ms, 0.5, s.n), format_percentile(s.p90_ms, 0.9, s.n),
                       format_percentile(s.p99_ms, 0.99, s.n), f"{format_ms(s.mean_ms)} ± {format_ms(s.std_ms)}",
                       "-" if s.fps is None else f"{s.fps:,.1f}", format_ms(s.first_iter_ms)]
        model = r.model + (f" ({r.details['model_args']})" if r.details.get("model_args") else "")
        cells = [r.created_at.replace("T", " ")[:19], r.short_id, model, r.shape_text, r.dtype + layout,
                 r.device, r.flags_text + (" (cancelled)" if r.cancelled else ""), *numbers,
                 r.fingerprint.get("device_name", "")]
        lines.append("| " + " | ".join(_md_cell(c) for c in cells) + " |")
    if any(r.stats is not None and not percentile_supported(0.99, r.stats.n) for r in records):  # p99 needs most
        lines += ["", UNSUPPORTED_LEGEND + "; items/s is items over the total time (the mean's rate)."]
    return "\n".join(lines) + "\n"


def export_records(records: Iterable[HistoryRecord], fmt: str = "json", metric: str | None = None) -> str:
    """The records as text: "json" (an array of full records, samples included), "csv" (one row per run,
    flags as flag.*, environment as env.*, no samples), "md" (a readable Markdown table), or what fleets ingest:
    "github-benchmark" (github-action-benchmark's custom JSON; `metric` latency or throughput) and "pytorch-v3"
    (rows of the PyTorch OSS benchmark database), both in engine/records/export_fleet.py."""
    records = list(records)
    fmt = fmt.strip().lower()
    from torchperf_tui.engine.records.export_fleet import FLEET_FORMATS, export_fleet

    if fmt in FLEET_FORMATS:
        return export_fleet(records, fmt, metric)
    if metric is not None:
        raise TorchperfError(f"--metric chooses github-benchmark's file (latency or throughput); {fmt} has no choice")
    if fmt == "json":
        return json.dumps([r.to_dict() for r in records], indent=2, ensure_ascii=False, allow_nan=False) + "\n"
    if fmt == "csv":
        return _export_csv(records)
    if fmt in ("md", "markdown"):
        return _export_md(records)
    raise TorchperfError(f"unknown export format {fmt!r}: choose one of {', '.join(EXPORT_FORMATS)}")
