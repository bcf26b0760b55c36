"""What one result becomes in MLflow: a run's name, parameters, metrics, tags and its samples as a JSON artifact.

Plain data, built from what the CLI and the app already hold without torch: a timing or a generation as its history
record, an A/B as its two arms' records (one run: both arms' statistics and the verdict), a throughput search and a
sweep as their results. mlflow_store.py writes a RunContent to a tracking store; nothing here imports mlflow.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from torchperf_tui.core.formatting import format_shape
from torchperf_tui import __version__

# MLflow's own limits: a parameter's value (6000 characters since MLflow 2; 500 before) and a tag's key and value.
# A longer value is cut with a mark, never refused: the full text stays in the history and the artifact.
PARAM_MAX = 500
TAG_MAX = 5000
STAT_METRICS = ("p50_ms", "p90_ms", "p99_ms", "mean_ms", "std_ms", "min_ms", "max_ms", "iqr_ms")
ARTIFACT = "samples.json"


@dataclass
class RunContent:
    """One MLflow run: `metrics` are (key, value, step) (step 0 but for a sweep's lengths); `artifact` is written as
    samples.json."""

    name: str
    params: dict[str, str] = field(default_factory=dict)
    metrics: list[tuple[str, float, int]] = field(default_factory=list)
    tags: dict[str, str] = field(default_factory=dict)
    artifact: dict[str, Any] = field(default_factory=dict)

    def metric(self, key: str, value: Any, step: int = 0) -> None:
        """Add a metric when it is a finite number (MLflow takes floats; None, NaN and text are left out)."""
        if isinstance(value, bool):
            value = float(value)
        if isinstance(value, (int, float)) and math.isfinite(value):
            self.metrics.append((key, float(value), step))

    def param(self, key: str, value: Any) -> None:
        if value is None or value == "":
            return
        text = value if isinstance(value, str) else _text(value)
        self.params[key] = text if len(text) <= PARAM_MAX else text[:PARAM_MAX - 1] + "…"

    def tag(self, key: str, value: Any) -> None:
        if value is None or value == "":
            return
        text = value if isinstance(value, str) else _text(value)
        self.tags[key] = text[:TAG_MAX]


def _text(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return format_shape(value) if all(isinstance(v, int) for v in value) else ", ".join(map(str, value))
    return str(value)


def _environment_tags(content: RunContent, fingerprint: dict[str, Any] | None) -> None:
    """The fingerprint (torch, CUDA, cuDNN, driver, device name, host, ...) as tags `env.KEY`."""
    for key, value in sorted((fingerprint or {}).items()):
        if isinstance(value, (str, int, float, bool)):
            content.tag(f"env.{key}", value)


def _common_tags(content: RunContent, kind: str, fingerprint: dict[str, Any] | None) -> None:
    content.tag("torchperf.kind", kind)
    content.tag("torchperf.version", __version__)
    _environment_tags(content, fingerprint)


def _flag_params(content: RunContent, flags: dict[str, Any], prefix: str = "flag.") -> None:
    for key, value in sorted(flags.items()):
        if value is not None:
            content.param(f"{prefix}{key}", value)


def _stat_metrics(content: RunContent, stats: Any, prefix: str = "") -> None:
    if stats is None:
        return
    for name in STAT_METRICS:
        content.metric(prefix + name, getattr(stats, name, None))
    content.metric(prefix + "samples_per_s", getattr(stats, "fps", None))  # items over the samples' total time
    content.metric(prefix + "samples_per_s_at_p50", getattr(stats, "fps_at_median", None))
    content.metric(prefix + "n", getattr(stats, "n", None))


def _setup_params(content: RunContent, record: Any) -> None:
    """What was measured: the record's set-up (model, its overrides, input, dtype, device, step, ...)."""
    for key, value in record.setup().items():
        if key == "channels_last" and not value:
            continue
        content.param(key, value)
    content.param("batch", record.batch)
    content.param("inputs", record.details.get("inputs"))
    content.param("timer", record.timer)


def describe_record(record: Any, saved: bool, note: str = "") -> RunContent:
    """A timing's or a generation's history record as one run; `saved`: the record is in the history (its id is
    tagged, so the run and the history line can be found from each other); `note`: the run's description, the
    record's line as `history` words it (wording/history.py: the front end words it, the engine does not)."""
    content = RunContent(name=f"{record.kind} {record.model} {record.shape_text}")
    _setup_params(content, record)
    content.param("flags", record.flags_text)
    _flag_params(content, record.flags)
    _stat_metrics(content, record.stats)
    content.metric("duration_s", record.duration_s)
    details = record.details
    for key in ("compile_s", "tuning_cost_ms", "repeat_p50_ms", "tokens_per_s", "kv_cache_bytes", "prompt_len",
                "new_tokens", "bytes_per_step", "bandwidth_gbs", "mbu_pct", "predicted_ratio"):
        content.metric(key, details.get(key))
    drift = details.get("drift")  # a run that changed numerics: how far its outputs moved from float32's
    if isinstance(drift, dict):
        for key in ("sqnr_db", "max_abs_error", "argmax_changed"):
            content.metric(f"drift.{key}", drift.get(key))
    ttft = details.get("ttft_stats")
    if isinstance(ttft, dict):
        content.metric("ttft_p50_ms", ttft.get("p50_ms"))
        content.metric("ttft_p90_ms", ttft.get("p90_ms"))
    _common_tags(content, record.kind, record.fingerprint)
    if saved:
        content.tag("torchperf.record_id", record.id)
    if note:
        content.tag("mlflow.note.content", note)
    if record.disturbed:
        content.tag("torchperf.disturbed", record.disturbed_text())
    kept = record.to_dict()  # the samples as the history keeps them (rounded to what a timer resolves)
    content.artifact = {"kind": record.kind, "unit": "ms", "samples_ms": kept["samples_ms"], "record": kept}
    return content


def describe_ab(records: list[Any], saved: bool) -> RunContent:
    """An interleaved A/B (its two arms' history records) as one run: what both arms share as parameters, each
    arm's SPEC and flags as `a.*` / `b.*`, each arm's statistics as metrics `a.p50_ms`, ..., the verdict (the ratio
    B/A of the medians, its interval, the p-value, whether it is significant) as metrics and its sentence as the
    run's note."""
    arm = {r.details.get("arm", name): r for r, name in zip(records, ("A", "B"))}
    a, b = arm["A"], arm["B"]
    content = RunContent(name=f"compare {a.model} {a.shape_text}")
    _setup_params(content, a)
    for name, record in (("a", a), ("b", b)):
        content.param(f"{name}.spec", record.details.get("spec") or "(the base run)")
        content.param(f"{name}.flags", record.flags_text)
        content.param(f"{name}.dtype", record.dtype)
        _flag_params(content, record.flags, prefix=f"{name}.flag.")
        _stat_metrics(content, record.stats, prefix=f"{name}.")
        content.metric(f"{name}.blocks", record.details.get("blocks"))
    verdict = a.details.get("verdict")
    if isinstance(verdict, dict):
        for key in ("ratio", "ci_low", "ci_high", "p_value", "significant", "blocks", "alpha"):
            content.metric(key if key != "blocks" else "pairs", verdict.get(key))
    content.metric("duration_s", a.duration_s)
    _common_tags(content, "compare", a.fingerprint)
    if saved:
        content.tag("torchperf.record_id.a", a.id)
        content.tag("torchperf.record_id.b", b.id)
    content.tag("torchperf.verdict", a.details.get("summary"))
    content.tag("mlflow.note.content", a.details.get("summary"))
    if a.disturbed:
        content.tag("torchperf.disturbed", a.disturbed_text())
    content.artifact = {"kind": "compare", "unit": "ms", "a": {"spec": a.details.get("spec"),
                                                                "samples_ms": list(a.samples_ms)},
                        "b": {"spec": b.details.get("spec"), "samples_ms": list(b.samples_ms)},
                        "verdict": verdict, "records": [a.to_dict(), b.to_dict()]}
    return content


def describe_records(records: list[Any], saved: bool, note: Callable[[Any], str] | None = None) -> RunContent:
    """The run of a finished measurement's history records: two arms of kind "ab" are one comparison (its verdict
    its note); one record's note is `note(record)` (wording.history.history_line)."""
    if len(records) == 2 and all(r.kind == "ab" for r in records):
        return describe_ab(records, saved)
    if len(records) != 1:
        raise ValueError(f"one record, or an A/B's two, not {len(records)}")
    return describe_record(records[0], saved, note(records[0]) if note is not None else "")


def _result_params(content: RunContent, result: Any, shape: Iterable[int] | None) -> None:
    content.param("model", result.model)
    content.param("model_args", getattr(result, "model_args", ""))
    content.param("seq_len", getattr(result, "seq_len", None))
    content.param("inputs", getattr(result, "inputs", ""))
    if shape is not None:
        content.param("input_shape", tuple(shape))
    content.param("dtype", result.dtype)
    content.param("device", result.device)
    content.param("step", getattr(result, "step", "infer"))


def describe_throughput(result: Any, fingerprint: dict[str, Any] | None, flags_text: str = "") -> RunContent:
    """A throughput search: the best batch and its samples/s and latency as metrics, every try's batch as a step of
    `try.samples_per_s` and `try.latency_ms` (MLflow charts them against the batch), the tries as the artifact."""
    content = RunContent(name=f"throughput {result.model} {format_shape(result.sample_shape)}")
    _result_params(content, result, result.sample_shape)
    if getattr(result, "channels_last", False):
        content.param("channels_last", True)
    content.param("flags", flags_text)
    content.param("max_batch_bound", result.max_batch_bound)
    content.param("to_oom", result.to_oom)
    content.param("time_budget_s", result.time_budget_s)
    content.param("stop_rule", getattr(result.stop_rule, "value", result.stop_rule))
    content.metric("best_batch", result.best_batch)
    content.metric("samples_per_s", result.samples_per_s)
    content.metric("latency_ms", result.latency_ms)
    content.metric("max_batch", result.max_batch)
    content.metric("limit_found", result.limit_found)
    content.metric("first_failure", result.first_failure)
    content.metric("duration_s", result.duration_s)
    for point in result.points:
        content.metric("try.samples_per_s", point.samples_per_s, step=point.batch)
        content.metric("try.latency_ms", point.latency_ms, step=point.batch)
    _common_tags(content, "throughput", fingerprint)
    content.tag("mlflow.note.content", result.stop_reason)
    data = result.to_dict()
    content.artifact = {"kind": "throughput", "unit": "ms", "tries": data.get("tries"),
                        "measurement": data.get("measurement"), "result": data}
    return content


def describe_sweep(result: Any, fingerprint: dict[str, Any] | None) -> RunContent:
    """A sweep: its lengths as the steps of `p50_ms`, `p90_ms`, `tokens_per_s` and `peak_bytes` (per arm `a.` and
    `b.` in an A/B sweep), so MLflow charts the curve against the length; the points as the artifact."""
    content = RunContent(name=f"sweep {result.model} {result.lengths[0] if result.lengths else ''}-"
                              f"{result.lengths[-1] if result.lengths else ''}")
    _result_params(content, result, None)
    content.param("batch", result.batch)
    content.param("seq_lens", f"{result.lengths[0]}-{result.lengths[-1]}" if result.lengths else "")
    content.param("time_budget_s", result.time_budget_s)
    for name, ran in result.arms:
        content.param(f"{name.lower()}.ran" if name else "flags", ran)
    for point in result.points:
        prefix = f"{point.arm.lower()}." if point.arm else ""
        if not point.fits:
            continue
        content.metric(prefix + "p50_ms", point.median_ms, step=point.length)
        content.metric(prefix + "p90_ms", point.p90_ms, step=point.length)
        content.metric(prefix + "tokens_per_s", point.tokens_per_s, step=point.length)
        content.metric(prefix + "peak_bytes", point.peak_bytes, step=point.length)
    fitted = [p.length for p in result.points if p.fits]
    content.metric("longest_fitted", max(fitted) if fitted else None)
    content.metric("duration_s", result.duration_s)
    _common_tags(content, "sweep", fingerprint)
    content.tag("mlflow.note.content", result.stop_reason)
    content.artifact = {"kind": "sweep", "unit": "ms", "result": result.to_dict()}
    return content
