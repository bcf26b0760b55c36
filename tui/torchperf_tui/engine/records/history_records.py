"""Run records: one completed run as the history keeps it and export writes it, built from a timing run or
an A/B comparison, and read back from JSON with every field checked.

No torch and no textual here: `torchperf-tui history` and `export`, and the TUI's history pane, read and
render records without paying 2-3 s for torch. Records hold flags as a plain dict for the same reason; only
a record made without a fingerprint takes one (see engine/records/fingerprint.py), and that probe imports torch.
"""

from __future__ import annotations

import dataclasses
import math
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from torchperf_tui.core.flag_table import recorded_flags
from torchperf_tui.engine.records.fingerprint import environment_fingerprint
from torchperf_tui.core.json_checks import finite_float, is_int, json_type, nonfinite_to_none, shown
from torchperf_tui.engine.hardware.nvml import to_jsonable
from torchperf_tui.core.stats import TimingStats, compute_stats
from torchperf_tui.core.formatting import format_shape, printable
from torchperf_tui.engine.workloads.model_source import source_of
from torchperf_tui.core.marks import disturbance_marks

if TYPE_CHECKING:  # only for annotations: importing them would import torch
    from torchperf_tui.engine.measurements.abtest import ABResult
    from torchperf_tui.engine.measurements.timing import TimingResult

# Bumped when a field changes meaning; readers ignore keys they do not know, so adding fields needs no bump.
RECORD_SCHEMA = 1
# Samples are kept to 0.1 microsecond (in ms, 4 decimals): finer than a CUDA event resolves (about 0.5 us) and than
# perf_counter's own cost. A CUDA event's float32 reading has a repr of some 19 bytes, 8 once rounded; a CPU reading
# (perf_counter_ns / 1e6) has at most 6 decimals, some 10 bytes, 8 once rounded (resnet18 on this box: 634 -> 504
# bytes for 64 samples). A baseline gate needs the samples; old lines with full floats read the same.
SAMPLE_DECIMALS = 4


@dataclass
class HistoryRecord:
    """One completed run as it is kept in the history and exported.

    `flags` is `Flags.to_dict()` and `flags_text` its `describe(device)`, stored at record time so that
    reading the history needs no torch; `num_threads` there is the count the run used (left to the process,
    its default count), so two runs on different thread counts never read as the same flags; read from a file
    written before a flag existed, that flag as the run had it (core/flag_table.recorded_flags). A run whose
    model's code changed torch's global state keeps what it did in `details["state_notes"]`. `fingerprint` is
    the environment (see engine/records/fingerprint.py); the run's own set-up (model, shape, dtype, channels_last,
    device, flags) lives in the record's fields. `details` carries what a kind adds (compile mode for timing;
    later throughput and compare data).
    """

    id: str
    kind: str
    created_at: str  # ISO 8601, UTC, when the run finished
    model: str
    input_shape: tuple[int, ...]
    dtype: str
    channels_last: bool
    device: str
    flags: dict[str, Any]
    flags_text: str
    stats: TimingStats | None  # None when the run was cancelled before any timed sample
    samples_ms: list[float]
    fingerprint: dict[str, Any]
    cancelled: bool = False
    duration_s: float | None = None
    timer: str = ""
    details: dict[str, Any] = field(default_factory=dict)
    schema: int = RECORD_SCHEMA
    # Every reason the run's numbers may not be the model's alone, one line each: what the app saw beside the run
    # ("window resized during the run"), then the host's noise ("noisy host: load 3.1 on 2 cores, ...", "noisy
    # samples: p50 is 67x the fastest sample"). Empty (no key in the file): nothing was seen; `details["host_noise"]`
    # says whether the host was read at all. A gate reads this to treat the run as such.
    disturbed: list[str] = field(default_factory=list)
    # The run as it was asked for (BenchConfig.to_record, JSON): a timing run's model, input, dtype, device, flags as
    # asked, run options, counts, seed and time budget, read back whole by a gate that measures it again
    # (engine/records/baseline.py). Empty (no key in the file) in other kinds' records and those from before.
    config: dict[str, Any] = field(default_factory=dict)

    @property
    def batch(self) -> int:
        return self.input_shape[0]

    @property
    def shape_text(self) -> str:
        return format_shape(self.input_shape)

    @property
    def short_id(self) -> str:
        return self.id[:8]

    @property
    def state_notes(self) -> list[str]:
        """What the model's code changed in torch's global state during the run (read from a file: strings
        only)."""
        notes = self.details.get("state_notes")
        return [note for note in notes if isinstance(note, str)] if isinstance(notes, list) else []

    def setup(self) -> dict[str, Any]:
        """What was measured, for spotting that two runs are not like for like; the seed where the shapes vary and
        the record keeps it (a random schedule draws them from it; a record from before configs were kept does not
        say which seed its run had)."""
        setup = {"model": self.model, "input_shape": self.shape_text, "dtype": self.dtype,
                 "channels_last": self.channels_last, "device": self.device,
                 "compile": self.details.get("compile_mode"), "shapes": self.details.get("shapes", "fixed"),
                 "step": self.details.get("step", "infer"), "optimizer": self.details.get("optimizer"),
                 "amp": self.details.get("amp"), "quant": self.details.get("quant"), "attn": self.details.get("attn"),
                 "model_args": self.details.get("model_args", ""),
                 "seq_len": self.details.get("seq_len"), "generate": self.details.get("new_tokens"),
                 "cache": self.details.get("cache")}
        if setup["shapes"] != "fixed" and "seed" in self.config:
            setup["seed"] = self.config["seed"]
        return setup

    def disturbed_text(self) -> str:
        """The record's disturbance marks in one line ('window resized during the run; noisy host: ...'), '' when
        it has none."""
        return "; ".join(self.disturbed)

    def throttle_text(self) -> str:
        """'throttled 40 %: power cap (software)' when the fingerprint says the GPU throttled during the run's
        timed iterations (engine/hardware/run_conditions.py), else ''. The fingerprint is read from a file: its values
        are checked, not trusted."""
        fingerprint = self.fingerprint
        if fingerprint.get("gpu_throttled") is not True:
            return ""
        share = fingerprint.get("gpu_throttled_share")
        reasons = fingerprint.get("gpu_throttle_reasons")
        text = "throttled"
        if isinstance(share, (int, float)) and not isinstance(share, bool) and math.isfinite(share):
            text += f" {share * 100:.0f} %"
        if isinstance(reasons, str) and reasons:
            text += ": " + printable(reasons, 80)  # no escape sequences from a file
        return text

    def to_dict(self) -> dict[str, Any]:
        """JSON-able; non-finite floats become None so every JSON reader (not only Python's) accepts it."""
        data = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        data["input_shape"] = list(self.input_shape)
        data["stats"] = None if self.stats is None else dataclasses.asdict(self.stats)
        data["samples_ms"] = None  # put back below: walking the samples one by one was most of an export's time
        if not self.disturbed:  # no key, no mark: a record from before marks were kept writes back the same
            del data["disturbed"]
        if not self.config:  # the same for a record without its config
            del data["config"]
        data = nonfinite_to_none(to_jsonable(data))
        data["samples_ms"] = jsonable_samples(self.samples_ms)
        return data

    @classmethod
    def from_dict(cls, data: Any) -> "HistoryRecord":
        """The inverse of to_dict, checked field by field; unknown keys (from a newer version) are ignored.

        A record that passes is safe to summarise, compare and export: strings where strings belong, finite
        numbers where numbers do, objects of bounded depth. Raises ValueError naming the first problem, which
        `HistoryFile.load` counts as a skipped line.
        """
        if not isinstance(data, dict):
            raise ValueError(f"a JSON {json_type(data)}, not a record object")
        missing = [k for k in ("id", "kind", "created_at", "model", "input_shape", "dtype", "device")
                   if k not in data]
        if missing:
            raise ValueError(f"record lacks {', '.join(missing)}")
        text = {name: _string(data, name) for name in ("id", "kind", "created_at", "model", "dtype", "device")}
        shape = data["input_shape"]
        if not (isinstance(shape, list) and shape and all(is_int(d) and d >= 0 for d in shape)):
            raise ValueError(f"input_shape is not a list of whole numbers: {shown(shape)}")
        samples = data.get("samples_ms")
        if samples is None:
            samples = []
        if not isinstance(samples, list):
            raise ValueError(f"samples_ms is a JSON {json_type(samples)}, not a list of numbers")
        # Floats whose sum is finite are each finite: the usual case, checked at C speed; else one by one.
        if not (set(map(type, samples)) <= {float} and math.isfinite(sum(samples))):
            samples = [finite_float(s, "a sample in samples_ms") for s in samples]
        stats = data.get("stats")
        duration = data.get("duration_s")
        schema = data.get("schema", RECORD_SCHEMA)
        if not is_int(schema):
            raise ValueError(f"schema is not a whole number: {shown(schema)}")
        stats = None if stats is None else TimingStats.from_dict(stats)
        _check_latencies(samples, stats, data)
        return cls(
            **text, input_shape=tuple(shape),
            channels_last=_boolean(data, "channels_last"), flags=recorded_flags(_object(data, "flags")),
            flags_text=_string(data, "flags_text", ""),
            stats=stats, samples_ms=samples, fingerprint=_object(data, "fingerprint"),
            cancelled=_boolean(data, "cancelled"),
            duration_s=None if duration is None else finite_float(duration, "duration_s"),
            timer=_string(data, "timer", ""), details=_object(data, "details"), schema=schema,
            disturbed=_marks(data, "disturbed"), config=_object(data, "config"),
        )


# The longest latency a record may hold, in ms: a day. Past it (1e308 ms, say) a figure is no measurement but a
# broken or forged file, and is never shown or exported as one.
MAX_LATENCY_MS = 86_400_000.0


def _check_latencies(samples: list[float], stats: TimingStats | None, data: dict[str, Any]) -> None:
    """ValueError naming the first figure of the record (a sample, a statistic, its duration, a generation's time to
    first token or tokens/s) that is negative or past MAX_LATENCY_MS: a record with one is skipped on read, counted
    in the one warning line of the bad lines, never shown or exported as a figure. Finiteness and types are checked
    where each value is read; here only the range."""
    if samples and not (min(samples) >= 0 and max(samples) <= MAX_LATENCY_MS):
        bad = next(s for s in samples if not 0 <= s <= MAX_LATENCY_MS)
        raise ValueError(f"a sample in samples_ms is {_out_of_range(bad, MAX_LATENCY_MS, 'ms')}")
    figures: list[tuple[str, Any, float, str]] = []  # (name, value, the most it may be, its unit)
    if stats is not None:
        figures += [(f"stats.{f.name}", getattr(stats, f.name), math.inf if f.name == "fps" else MAX_LATENCY_MS, "ms")
                    for f in dataclasses.fields(stats) if f.name != "n"]
    figures.append(("duration_s", data.get("duration_s"), MAX_LATENCY_MS / 1000, "s"))
    details = data.get("details")
    if isinstance(details, dict):  # a generation's: what `history` shows beside its per-token figures
        ttft = details.get("ttft_stats")
        if isinstance(ttft, dict):
            figures += [(f"details.ttft_stats.{name}", value, MAX_LATENCY_MS, "ms") for name, value in ttft.items()
                        if name not in ("n", "fps")]
        ttft_ms = details.get("ttft_ms")
        if isinstance(ttft_ms, list):
            figures += [("a time in details.ttft_ms", value, MAX_LATENCY_MS, "ms") for value in ttft_ms]
        figures.append(("details.tokens_per_s", details.get("tokens_per_s"), math.inf, ""))
    for name, value, most, unit in figures:
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            continue  # absent, or not a number: the field's own reader says so where it reads it
        try:
            number = float(value)
        except OverflowError:  # a whole number of 400 digits
            number = math.inf
        if not (math.isfinite(number) and 0 <= number <= most):
            raise ValueError(f"{name} is {_out_of_range(number, most, unit)}")


def _out_of_range(value: float, most: float, unit: str) -> str:
    if not math.isfinite(value):
        return f"not a finite number: {shown(value)}"
    if value < 0:
        return f"negative: {shown(value)}"
    return f"{shown(value)} {unit}, over a day: no measurement"


def jsonable_samples(samples_ms: list[float]) -> list[float | None]:
    """The samples as to_dict writes them: compact_samples, a non-finite one as None (nonfinite_to_none's rule)."""
    samples = compact_samples(samples_ms)
    if set(map(type, samples)) <= {float} and math.isfinite(sum(samples)):  # the usual case, checked at C speed
        return samples
    return [None if isinstance(s, float) and not math.isfinite(s) else s for s in samples]


def compact_samples(samples_ms: list[float]) -> list[float]:
    """The samples as a record keeps them: rounded to SAMPLE_DECIMALS (non-finite ones are left to to_dict)."""
    if set(map(type, samples_ms)) <= {float} and math.isfinite(sum(samples_ms)):  # the usual case: no check each
        return [round(s, SAMPLE_DECIMALS) for s in samples_ms]
    return [round(s, SAMPLE_DECIMALS) if isinstance(s, float) and math.isfinite(s) else s for s in samples_ms]


# How deep flags, fingerprint and details may nest: the writer's own nest a few levels (an A/B verdict's tests);
# the bound keeps the recursive walks of export (to_jsonable, nonfinite_to_none, json.dumps) far from the
# recursion limit.
MAX_RECORD_DEPTH = 32


def _string(data: dict[str, Any], name: str, default: str | None = None) -> str:
    value = data.get(name, default)
    if not isinstance(value, str):
        raise ValueError(f"{name} is not a string: {shown(value)}")
    return value


def _boolean(data: dict[str, Any], name: str) -> bool:
    value = data.get(name, False)
    if not isinstance(value, bool):
        raise ValueError(f"{name} is not true or false: {shown(value)}")
    return value


def _object(data: dict[str, Any], name: str) -> dict[str, Any]:
    """A JSON object (null or absent: empty) whose values nest at most MAX_RECORD_DEPTH deep."""
    value = data.get(name)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValueError(f"{name} is a JSON {json_type(value)}, not an object")
    stack = [(value, 1)]
    while stack:  # a loop, not recursion: the depth is what is being checked
        item, depth = stack.pop()
        if depth > MAX_RECORD_DEPTH:
            raise ValueError(f"{name} nests deeper than {MAX_RECORD_DEPTH} levels")
        children = item.values() if isinstance(item, dict) else item
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return value


MAX_MARKS = 16  # disturbance marks kept from a file; each cut to MAX_MARK_CHARS
MAX_MARK_CHARS = 200


def _marks(data: dict[str, Any], name: str) -> list[str]:
    """A list of one-line strings (null or absent: none), made printable (no escape sequence from a file reaches
    the terminal: formatting.printable), each and their number bounded."""
    value = data.get(name)
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ValueError(f"{name} is not a list of strings: {shown(value)}")
    return [printable(item, MAX_MARK_CHARS) for item in value[:MAX_MARKS]]


def new_record_id() -> str:
    """48 random bits in hex: short enough to type, plenty for one user's history."""
    return uuid.uuid4().hex[:12]


def iso_utc(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, timezone.utc).isoformat(timespec="seconds")


def record_from_timing(result: "TimingResult", fingerprint: dict[str, Any] | None = None) -> HistoryRecord:
    """A history record of a timing run. Without a fingerprint, one is taken now for the run's device."""
    env = environment_fingerprint(device=result.device) if fingerprint is None else dict(fingerprint)
    env.update(_conditions_fingerprint(getattr(result, "conditions", None)))
    details: dict[str, Any] = {"warmup_iters": len(result.warmup_ms)}
    # getattr: fields that timing.py grew later; an older TimingResult simply lacks them.
    for name in ("compile_mode", "compiled", "compile_s", "compile_error", "step", "optimizer", "amp", "loss"):
        if hasattr(result, name):
            details[name] = getattr(result, name)
    cost = getattr(result, "compile_cost", None)
    if cost is not None:  # the cold and warm starts by phase, the break-even against each, the graph breaks
        details["compile_cost"] = cost.to_dict()
    details.update(model_facts(result))
    details.update(numerics_details(result))
    report = getattr(result, "shape_report", None)
    if getattr(result, "shapes", "fixed") != "fixed" and report is not None:
        details["shapes"] = result.shapes
        details["tuning_cost_ms"] = report.tuning_cost_ms
        details["first_seen"] = report.first_seen
        details["distinct_shapes"] = report.distinct
        details["repeat_p50_ms"] = result.repeat_stats.p50_ms if result.repeat_stats else None
    threads = getattr(result, "threads_used", None)
    if getattr(result, "state_notes", None):
        details["state_notes"] = list(result.state_notes)
    noise = getattr(result, "host_noise", None)
    if noise is not None:
        details["host_noise"] = noise.to_dict()
    marks = disturbance_marks(result)
    return HistoryRecord(
        id=new_record_id(), kind="timing", created_at=iso_utc(result.started_at + result.duration_s),
        model=result.model, input_shape=tuple(result.input_shape), dtype=result.dtype,
        channels_last=result.channels_last, device=result.device, flags=flags_used(result.flags, threads),
        flags_text=result.flags_text(), stats=result.stats, samples_ms=list(result.samples_ms),
        fingerprint=env, cancelled=result.cancelled, duration_s=result.duration_s, timer=result.timer,
        details=details, disturbed=list(marks), config=config_kept(getattr(result, "config", None)),
    )


def numerics_details(run: Any, drift_b: Any = None) -> dict[str, Any]:
    """What a record keeps of a run's (or an arm's) numerics: its quantization scheme with the layers it converted
    and left, its drift from the float32 model, and (B's record of an A/B) its drift against arm A."""
    config = getattr(run, "config", None)
    details: dict[str, Any] = {}
    for option in ("quant", "attn"):  # the run options that change what the model computes, or how
        if getattr(config, option, None) is not None:
            details[option] = getattr(config, option)
    for key, value in (("quantized", getattr(run, "quantized", None)), ("drift", getattr(run, "drift", None)),
                       ("drift_b", drift_b)):
        if value is not None:
            details[key] = value.to_dict()
    if getattr(run, "predicted_ratio", None) is not None:  # a quantized run's: its pass quantized over as it is
        details["predicted_ratio"] = run.predicted_ratio
    return details


def config_kept(config: Any) -> dict[str, Any]:
    """What a record keeps of the run's config: all of it (BenchConfig.to_record), where its model is named (a
    catalogue name or module:factory), not a module built in the process."""
    return config.to_record() if config is not None and isinstance(config.model, str) else {}


def records_from_ab(result: "ABResult", fingerprint: dict[str, Any] | None = None) -> list[HistoryRecord]:
    """Two history records of an interleaved comparison, one per arm (kind "ab"), each carrying the
    verdict and the other arm's id, so a comparison is kept and exported like any run."""
    env = environment_fingerprint(device=result.device) if fingerprint is None else dict(fingerprint)
    ids = {"A": new_record_id(), "B": new_record_id()}
    verdict = result.verdict.to_dict() if result.verdict is not None else None
    created = iso_utc(time.time())
    # The comparison's marks on both arms: the arms' blocks interleave, so what disturbed one disturbed the pair.
    marks = disturbance_marks(result)
    records = []
    for name, arm in (("A", result.a), ("B", result.b)):
        details = {"arm": name, "pair": ids["B" if name == "A" else "A"], "spec": arm.spec, "shapes": arm.shapes,
                   "blocks": len(arm.blocks), "verdict": verdict, "summary": result.summary(),
                   "step": getattr(arm, "step", "infer"), "optimizer": getattr(arm, "optimizer", None),
                   "amp": getattr(arm, "amp", None), **model_facts(result),
                   **numerics_details(arm, getattr(result, "drift_b", None) if name == "B" else None)}
        if getattr(result, "state_notes", None):
            details["state_notes"] = list(result.state_notes)
        noise = getattr(arm, "host_noise", None)  # the host over the blocks, and this arm's spread
        if noise is not None:
            details["host_noise"] = noise.to_dict()
        threads = getattr(arm, "threads_used", None)
        arm_env = {**env, **_conditions_fingerprint(getattr(arm, "conditions", None))}
        records.append(HistoryRecord(
            id=ids[name], kind="ab", created_at=created, model=result.model,
            input_shape=tuple(result.input_shape), dtype=arm.dtype, channels_last=arm.channels_last,
            device=result.device, flags=flags_used(arm.flags, threads),
            flags_text=arm.flags.describe(result.device, threads_used=threads,
                                          default_threads=getattr(arm, "threads_asked", None)),
            stats=compute_stats(arm.samples_ms, batch=result.input_shape[0]),
            samples_ms=list(arm.samples_ms), fingerprint=arm_env, cancelled=result.cancelled,
            duration_s=result.duration_s, timer="cuda-events" if result.device.startswith("cuda") else "perf_counter",
            details=details, disturbed=list(marks), config=config_kept(getattr(arm, "config", None))))
    return records


def model_facts(result: Any) -> dict[str, Any]:
    """Where the model came from and what it was fed beyond its main shape, for a record's details: its source
    (torchvision, timm, hf or custom), its overrides, a token model's sequence length and its inputs in words (the
    last three only when there are any, so a torchvision run's record reads as before)."""
    facts: dict[str, Any] = {"source": source_of(result.model) if isinstance(result.model, str) else "custom"}
    for name in ("model_args", "seq_len", "inputs"):
        value = getattr(result, name, None)
        if value:
            facts[name] = value
    return facts


def flags_used(flags: Any, threads: int | None) -> dict[str, Any]:
    """The flags as a dict, with the thread count the run used where the flags left it to the process."""
    data = flags.to_dict()
    if data.get("num_threads") is None and threads is not None:
        data["num_threads"] = threads
    return data


def _conditions_fingerprint(conditions: Any) -> dict[str, Any]:
    """The GPU conditions a run was measured under (clocks, throttling, temperature, power, energy), as flat
    fingerprint keys; nothing for a CPU run."""
    return conditions.fingerprint() if conditions is not None else {}
