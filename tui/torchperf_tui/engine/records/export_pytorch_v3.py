"""Run records as rows of the PyTorch OSS benchmark database's v3 schema (the `benchmark.oss_ci_benchmark_v3`
table that vLLM and ExecuTorch upload to; pytorch/test-infra's clickhouse_db_schema/oss_ci_benchmark_v3): a JSON
array, one row per metric of each run, each row carrying the run's context:

  benchmark     name ("torchperf-tui bench" | "... compare" | "... generate"), mode (inference | training),
                dtype, extra_info (the set-up's name, flags, step, compile, the record's id, ...)
  model         name, type and origins (its source: torchvision, timm, hf, custom), backend (eager or
                torch.compile's mode), extra_info (its overrides)
  inputs        {input name: {dtype, extra_info: {shape, ...}}}
  runners       [{name (host), type (the device), cpu_info, gpu_info, gpu_count, extra_info}]
  dependencies  {torch, torchvision, transformers, timm, cuda, cudnn, driver, python: {version}}
  metric        name, benchmark_values (a statistic's one value, or a latency's samples), extra_info (unit, n,
                which way is better)
  timestamp     the run's end, Unix seconds

The schema's extra_info columns are maps of strings to strings, so every extra_info value is a string here.
Fields the CI uploader fills (repo, head_sha, workflow_id, job_id) are left to it. No torch here.
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from typing import Any, Iterable

from torchperf_tui.engine.records.fleet_records import (COMMANDS, LatencyFamily, clean_text, device_kind, device_name,
                                                        exported, finite, latency_families, rate, setup_flags,
                                                        setup_name)
from torchperf_tui.engine.records.history_records import HistoryRecord
from torchperf_tui.engine.workloads.model_source import source_of

BENCHMARK_NAME = "torchperf-tui"
# The fingerprint's key of each dependency, by the name the rows give it.
DEPENDENCIES = {"torch": "torch", "torchvision": "torchvision", "transformers": "transformers", "timm": "timm",
                "cuda": "cuda_runtime", "cudnn": "cudnn", "driver": "driver", "python": "python",
                "torchperf-tui": "torchperf_tui"}
# One named input of a token model's description: 'input_ids 1x128 int64 (ids < 50,257)', 'x 1x3x8x8'.
_INPUT = re.compile(r"^(?P<name>[A-Za-z_][\w.]*) (?P<shape>\d+(?:x\d+)*)"
                    r"(?: (?P<dtype>[a-z]+\d*))?(?: \((?P<note>.*)\))?$")


def string_map(values: dict[str, Any]) -> dict[str, str]:
    """An extra_info map: strings to strings (the schema's Map(String, String)); None and non-finite numbers are
    left out, other values written as JSON ('true', '2', '["a"]')."""
    out = {}
    for key, value in values.items():
        if value is None or value == "" or (isinstance(value, float) and finite(value) is None):
            continue
        if isinstance(value, str):
            out[key] = clean_text(value, 1000)
        else:
            try:
                out[key] = json.dumps(value, allow_nan=False, ensure_ascii=False, default=str)
            except ValueError:  # a non-finite number nested in it
                continue
    return out


def _benchmark(record: HistoryRecord) -> dict[str, Any]:
    details = record.details
    verdict = details.get("verdict")
    return {
        "name": f"{BENCHMARK_NAME} {COMMANDS.get(record.kind, clean_text(record.kind, 20))}",
        "mode": "training" if details.get("step") == "train" else "inference",
        "dtype": clean_text(record.dtype, 20),
        "extra_info": string_map({
            "setup": setup_name(record), "record_id": record.id, "kind": record.kind, "flags": setup_flags(record),
            "flags_text": record.flags_text, "channels_last": record.channels_last,
            "step": details.get("step", "infer"), "optimizer": details.get("optimizer"), "amp": details.get("amp"),
            "compile_mode": details.get("compile_mode"), "shapes": details.get("shapes"), "timer": record.timer,
            "device": record.device, "arm": details.get("arm"), "pair": details.get("pair"),
            "verdict": clean_text(details.get("summary"), 300) if isinstance(verdict, dict) else None,
            "prompt_len": details.get("prompt_len"), "new_tokens": details.get("new_tokens"),
            "disturbed": record.disturbed_text() or None, "duration_s": record.duration_s}),
    }


def _model(record: HistoryRecord) -> dict[str, Any]:
    # a record from before sources were kept has none: its spec says it ('hf:gpt2', 'pkg.mod:make', 'resnet18')
    source = clean_text(record.details.get("source"), 40) or source_of(clean_text(record.model, 200))
    compile_mode = clean_text(record.details.get("compile_mode"), 40)
    return {"name": clean_text(record.model, 200), "type": source,
            "backend": f"torch.compile ({compile_mode})" if compile_mode else "eager", "origins": [source],
            "extra_info": string_map({"overrides": record.details.get("model_args"),
                                      "seq_len": record.details.get("seq_len")})}


def _inputs(record: HistoryRecord) -> dict[str, Any]:
    """Each input by name with its dtype and shape: a token model's from its description ('input_ids 1x128 int64
    (ids < 50,257), attention_mask ...'), else the one float input at the record's shape and dtype."""
    text = clean_text(record.details.get("inputs"), 1000)
    if text:
        parsed = {}
        for part in re.split(r", (?=[A-Za-z_])", text):
            match = _INPUT.match(part)
            if match is None:
                break
            extra = {"shape": match["shape"], "note": match["note"]}
            parsed[match["name"]] = {"dtype": match["dtype"] or clean_text(record.dtype, 20),
                                     "extra_info": string_map(extra)}
        else:
            return parsed
    extra = {"shape": record.shape_text, "description": text or None,
             "channels_last": record.channels_last or None}
    return {"input": {"dtype": clean_text(record.dtype, 20), "extra_info": string_map(extra)}}


def _runners(record: HistoryRecord) -> list[dict[str, Any]]:
    env = record.fingerprint
    runner: dict[str, Any] = {key: value for key, value in (("name", clean_text(env.get("hostname"), 200)),
                              ("type", clean_text(record.device, 40)), ("cpu_info", clean_text(env.get("cpu"), 200)))
                              if value}
    if device_kind(record) == "cuda" and device_name(record):
        runner["gpu_info"] = device_name(record)
    count = env.get("gpu_count")
    if isinstance(count, int) and not isinstance(count, bool) and count >= 0:
        runner["gpu_count"] = count
    runner["extra_info"] = string_map({
        "compute_capability": env.get("compute_capability"), "cpu_threads": env.get("cpu_threads"),
        "platform": env.get("platform"), "gpu_throttled": env.get("gpu_throttled")})
    return [runner]


def _dependencies(record: HistoryRecord) -> dict[str, Any]:
    """The versions the run had (its fingerprint); one that was not installed or not available is left out."""
    out = {}
    for name, key in DEPENDENCIES.items():
        version = clean_text(record.fingerprint.get(key), 80)
        if version and not version.startswith("n/a"):
            out[name] = {"version": version}
    return out


def _timestamp(record: HistoryRecord) -> int | None:
    try:
        return int(datetime.fromisoformat(record.created_at).timestamp())
    except (ValueError, OverflowError, OSError):
        return None


def _metrics(record: HistoryRecord) -> list[dict[str, Any]]:
    metrics = []
    for family in latency_families(record):
        metrics += _family_metrics(family)
    figure = rate(record)
    if figure is not None:
        metrics.append({"name": figure.key, "benchmark_values": [figure.value],
                        "extra_info": string_map({"unit": figure.unit, "better": "bigger"})})
    return metrics


def _family_metrics(family: LatencyFamily) -> list[dict[str, Any]]:
    """A latency's samples ('latency_ms': every timed sample), then its statistics ('latency_p50_ms', ...)."""
    info = {"unit": "ms", "better": "smaller", "n": family.n}
    rows = []
    if family.samples_ms:
        rows.append({"name": f"{family.key}_ms", "benchmark_values": list(family.samples_ms),
                     "extra_info": string_map({**info, "values": "samples"})})
    for stat in ("p50", "p90", "p99", "mean"):
        value = getattr(family, f"{stat}_ms")
        if value is not None:
            rows.append({"name": f"{family.key}_{stat}_ms", "benchmark_values": [value],
                         "extra_info": string_map({**info, "values": stat})})
    return rows


def pytorch_v3_rows(records: Iterable[HistoryRecord]) -> list[dict[str, Any]]:
    """The v3 rows of every finished run (cancelled runs left out), one per metric, oldest run first."""
    rows = []
    for record in exported(records):
        context = {"benchmark": _benchmark(record), "model": _model(record), "inputs": _inputs(record),
                   "runners": _runners(record), "dependencies": _dependencies(record)}
        stamp = _timestamp(record)
        for metric in _metrics(record):
            row = {**context, "metric": metric}
            if stamp is not None:
                row["timestamp"] = stamp
            rows.append(row)
    return rows
