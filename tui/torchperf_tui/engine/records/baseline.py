"""A baseline for `compare --baseline REF`: the record REF names, read and checked, and the BenchConfig that
measures its configuration again.

REF is one of:
- a `bench MODEL --json` file (its "record" object, or a bare history record as JSON);
- a history file (JSON lines) with a filter, `--baseline-filter KEY=VALUE[,KEY=VALUE...]`: the newest timing
  record that matches every pair (no filter: the newest timing record in the file);
- a record's id, or a unique prefix of it, in the history file (--history, $TORCHPERF_HISTORY, or the default).

Every way a REF can be wrong is one BaselineError line. No torch here: the CLI reads the baseline before it starts
a measurement process, and the app's UI process marks one in History.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from torchperf_tui.core import options
from torchperf_tui.core.errors import TorchperfError
from torchperf_tui.engine.records.history_records import HistoryRecord
from torchperf_tui.core.input_files import InputFileError, read_small
from torchperf_tui.engine.measurements.bench_config import BenchConfig, DEFAULT_TIME_BUDGET_S
from torchperf_tui.core.flag_table import FLAG_ENTRIES
from torchperf_tui.core.run_option_table import run_option
from torchperf_tui.engine.measurements.flags import Flags
from torchperf_tui.engine.measurements.train_step import check_amp, check_optimizer, check_step
from torchperf_tui.engine.records.history_file import HistoryFile
from torchperf_tui.engine.workloads.inputs import canonical_dtype, parse_seq_len
from torchperf_tui.engine.workloads.model_args import parse_model_args

# A bench --json file is read whole: bound it (a history line is at most 16 MiB, see history_file.MAX_LINE_BYTES).
MAX_BASELINE_FILE_BYTES = 64 << 20
# Fewer timed samples than this give no interval worth a verdict.
MIN_BASELINE_SAMPLES = 5
# What --baseline-filter may name: a record's set-up (HistoryRecord.setup) and a few of its own fields.
FILTER_KEYS = ("id", "model", "input_shape", "dtype", "device", "channels_last", "compile", "shapes", "step",
               "optimizer", "amp", "quant", "attn", "model_args", "seq_len", "hostname")


class BaselineError(TorchperfError):
    """A baseline that cannot be read or used: missing, unreadable, corrupt, ambiguous, without samples."""


@dataclass(frozen=True)
class Baseline:
    """The baseline record and where it came from ('base.json', 'history.jsonl: newest with model=resnet18',
    'history id 3fa2c1')."""

    record: HistoryRecord
    source: str


def resolve_baseline(ref: str, history: str | os.PathLike | None = None, filter_text: str | None = None) -> Baseline:
    """The baseline REF names (see the module's docstring), checked to be a timing record with samples."""
    if not ref or not ref.strip():
        raise BaselineError("--baseline is empty: give a bench --json file, a history file or a record id")
    path = Path(ref).expanduser()
    if path.exists() or os.sep in ref or ref.endswith((".json", ".jsonl")):
        baseline = _from_file(path, filter_text)
    else:
        if filter_text:
            raise BaselineError(f"--baseline-filter goes with a history file, and {ref!r} is not a file")
        baseline = _from_history_id(ref.strip(), history)
    check_usable(baseline.record, baseline.source)
    return baseline


def check_usable(record: HistoryRecord, source: str = "") -> None:
    """BaselineError unless `record` is a completed timing run with enough samples to compare against."""
    where = f" ({source})" if source else ""
    if record.kind != "timing":
        raise BaselineError(f"record {record.short_id}{where} is a {record.kind} run: a baseline is a bench "
                            "(timing) run")
    if record.cancelled:
        raise BaselineError(f"record {record.short_id}{where} was cancelled: pick a completed run")
    if len(record.samples_ms) < MIN_BASELINE_SAMPLES:
        raise BaselineError(f"record {record.short_id}{where} keeps {len(record.samples_ms)} samples, a gate needs "
                            f"at least {MIN_BASELINE_SAMPLES} (records made before they kept samples have none)")


def _from_file(path: Path, filter_text: str | None) -> Baseline:
    try:  # a regular file only, never past its cap: a FIFO or /dev/zero is refused, not read
        text = read_small(path, "the baseline", MAX_BASELINE_FILE_BYTES).decode("utf-8")
    except FileNotFoundError:
        raise BaselineError(f"no baseline file {path}") from None
    except InputFileError as exc:
        raise BaselineError(str(exc)) from None
    except UnicodeDecodeError:
        raise BaselineError(f"the baseline {path} is not UTF-8 text") from None
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        data = None  # not one JSON document: JSON lines, a history file
    if isinstance(data, dict) and filter_text is None:
        return Baseline(_record_of_json(data, path), str(path))
    if data is not None and not isinstance(data, dict):
        raise BaselineError(f"the baseline {path} is a JSON {type(data).__name__}, not a bench --json result")
    return _from_history_file(path, filter_text)


def _record_of_json(data: dict[str, Any], path: Path) -> HistoryRecord:
    """The record of a bench --json result (its "record"), or a history record saved alone."""
    if data.get("modes") is not None:
        raise BaselineError(f"{path} is a bench --modes result: a baseline is one timing (bench without --modes)")
    raw = data.get("record", data if "id" in data and "kind" in data else None)
    if raw is None:
        raise BaselineError(f"{path} has no record: make the baseline with `bench MODEL --json > {path.name}` "
                            "(this version's bench --json carries one)")
    try:
        return HistoryRecord.from_dict(raw)
    except ValueError as exc:
        raise BaselineError(f"{path}: its record is corrupt: {exc}") from None


def _from_history_file(path: Path, filter_text: str | None) -> Baseline:
    wanted = parse_filter(filter_text)
    loaded = HistoryFile(path).load()
    if not loaded.records:
        raise BaselineError(f"{path} is not a baseline: neither a bench --json result (it is not one JSON object) "
                            "nor a history file (no line of it is a run record)")
    timing = [r for r in loaded.records if r.kind == "timing" and not r.cancelled]
    matches = [r for r in timing if matches_filter(r, wanted)]
    said = ", ".join(f"{k}={v}" for k, v in wanted.items())
    if not matches:
        raise BaselineError(f"no timing record in {path} matches {said}" if wanted
                            else f"no completed timing record in {path}")
    return Baseline(matches[-1], f"{path}: newest" + (f" with {said}" if said else " timing record"))


def _from_history_id(ref: str, history: str | os.PathLike | None) -> Baseline:
    file = HistoryFile(history)
    records = file.load().records
    found = {r.id: r for r in records if r.id.startswith(ref.lower())}
    if not found:
        raise BaselineError(f"no baseline file {ref} and no record with id {ref} in the history {file.path}")
    if len(found) > 1:
        shown = ", ".join(sorted(i[:8] for i in found)[:4])
        raise BaselineError(f"id {ref} is ambiguous in {file.path}: {len(found)} records start with it ({shown}"
                            f"{', ...' if len(found) > 4 else ''}): type more of it")
    record, = found.values()
    return Baseline(record, f"history id {record.short_id}")


def parse_filter(text: str | None) -> dict[str, str]:
    """'model=resnet18,dtype=float16' -> {'model': 'resnet18', 'dtype': 'float16'}; a bad pair is one line."""
    wanted: dict[str, str] = {}
    for part in (text or "").split(","):
        if not part.strip():
            continue
        key, sep, value = part.partition("=")
        key = key.strip().replace("-", "_")
        if not sep or not value.strip():
            raise BaselineError(f"--baseline-filter: {part.strip()!r} is not KEY=VALUE")
        if key not in FILTER_KEYS:
            raise BaselineError(f"--baseline-filter: unknown key {key!r}: one of {', '.join(FILTER_KEYS)}")
        wanted[key] = value.strip()
    return wanted


def matches_filter(record: HistoryRecord, wanted: dict[str, str]) -> bool:
    values = {**record.setup(), "hostname": record.fingerprint.get("hostname")}
    for key, value in wanted.items():
        if key == "id":
            if not record.id.startswith(value.lower()):
                return False
        elif _text(values.get(key)) != value.lower():
            return False
    return True


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else str(value).lower()


def config_of_record(record: HistoryRecord, *, source: str = "", threads_given: bool = False):
    """The BenchConfig that measures `record`'s configuration again: its model with its overrides, its input
    (shape with batch, sequence length), dtype, memory format, flags (threads, sdpa, matmul precision included),
    step, optimizer and mixed precision, compile mode, shape schedule and its seed, device, time budget, and its
    warm-up and iteration counts. The run options come from the config the record keeps (HistoryRecord.config, as
    the run asked for them: a warm-up of 'auto' stays 'auto'), or, in a record from before configs were kept, from
    its details. The flags are the record's own: those the run used, the thread count it ran on included, so that a
    box with more CPUs measures it on as many. As many timed iterations as it kept samples. Flags a newer version
    added and this one lacks are dropped (said by the differences, if any).

    A baseline file is input as much as the command line is: its settings go through the checks the same values
    typed as options go through (core/options.py and the parsers the options use), so a record that asks for 16
    threads on a 2-CPU box, a warm-up of 10**12 or a dtype float128 is one BaselineError line naming the record,
    not a run that oversubscribes the cores, never ends or fails later without saying where the value came from.
    `threads_given`: the command line sets the thread count, so the record's is not applied (nor checked)."""
    from dataclasses import fields

    # numpy: the app loads this module's results without it
    from torchperf_tui.engine.workloads.shapes import parse_schedule

    where = f"the baseline {record.short_id}" + (f" ({source})" if source else "")
    known = {f.name for f in fields(Flags)}
    asked = _run_options(record)
    try:
        flags = Flags().replace(**_checked_flags({k: v for k, v in record.flags.items() if k in known},
                                                 threads_given))
        model_args = parse_model_args(_model_args_text(asked["model_args"]))
        warmup, seq_len, seed = asked["warmup"], asked["seq_len"], asked["seed"]
        checked = dict(
            warmup=10 if warmup is None else options.warmup(_as_typed(warmup)),
            iters=options.iters(str(len(record.samples_ms)), name="iterations (its samples)"),
            dtype=canonical_dtype(record.dtype), device=options.device_name(record.device, name="device"),
            step=check_step(_as_typed(asked["step"] or "infer")),
            optimizer=check_optimizer(_as_typed(asked["optimizer"] or "sgd")),
            amp=check_amp(_as_typed(asked["amp"]) if asked["amp"] else None),
            seed=0 if seed is None else options.seed(_as_typed(seed), name="seed"))
        shapes = _as_typed(asked["shapes"] or "fixed")
        parse_schedule(shapes)
        compile_mode = run_option("compile").run_value(asked["compile"])
        compile_mode = None if compile_mode is None else run_option("compile").choose(_as_typed(compile_mode))
        seq_len = None if seq_len is None else parse_seq_len(_as_typed(seq_len))
        quant = None if asked["quant"] is None else run_option("quant").choose(_as_typed(asked["quant"]))
        attn = None if asked["attn"] is None else run_option("attn").choose(_as_typed(asked["attn"]))
        budget = _time_budget(record)
    except TorchperfError as exc:
        raise BaselineError(f"{where}: {exc}") from None
    except (TypeError, ValueError) as exc:
        raise BaselineError(f"{where}: its flags or overrides cannot be read: {exc}") from None
    return BenchConfig(
        model=record.model, input_shape=tuple(record.input_shape), channels_last=record.channels_last, flags=flags,
        compile=compile_mode, shapes=shapes, model_args=model_args, seq_len=seq_len, time_budget_s=budget, quant=quant,
        attn=attn,
        **checked)


def _time_budget(record: HistoryRecord) -> float | None:
    """The time budget the record's run had (None: none), checked as --time-budget typed; a record that keeps no
    config: bench's default."""
    if "time_budget_s" not in record.config:
        return DEFAULT_TIME_BUDGET_S
    budget = record.config["time_budget_s"]
    return None if budget is None else (options.time_budget(_as_typed(budget), name="time budget") or None)


# A run option as BenchConfig names it -> where a record from before configs were kept has it in its details.
DETAIL_OF_OPTION = {"warmup": "warmup_iters", "compile": "compile_mode", "step": "step", "optimizer": "optimizer",
                    "amp": "amp", "shapes": "shapes", "model_args": "model_args", "seq_len": "seq_len",
                    "quant": "quant", "attn": "attn"}


def _run_options(record: HistoryRecord) -> dict[str, Any]:
    """The run options `record`'s run asked for, as the record has them (unchecked): from its config, else from
    its details (no seed there: the default one)."""
    if record.config:
        return {name: record.config.get(name) for name in (*DETAIL_OF_OPTION, "seed")}
    return {**{name: record.details.get(key) for name, key in DETAIL_OF_OPTION.items()}, "seed": None}


def _model_args_text(value: Any) -> str:
    """The overrides as typed ('a=1,b=[2,3]'): a config keeps them as [key, value] pairs, older details as text."""
    if value is None or isinstance(value, str):
        return value or ""
    if not (isinstance(value, list) and all(isinstance(pair, list) and len(pair) == 2
                                            and all(isinstance(part, str) for part in pair) for pair in value)):
        raise ValueError(f"model_args is not a list of [key, value] pairs: {json.dumps(value)[:60]}")
    return ",".join(f"{key}={text}" for key, text in value)


def _as_typed(value: Any) -> str:
    """A value from a file as the command line would have typed it: strings as they are, anything else as JSON
    writes it (true, 1.5, null), so the option's check refuses what it would refuse typed."""
    return value if isinstance(value, str) else json.dumps(value)


def _checked_flags(flags: dict[str, Any], threads_given: bool) -> dict[str, Any]:
    """A record's flags as the command line would have them: on/off flags true or false, the thread count through
    options.thread_count as if typed (so 1.5, "x", 0 and more threads than this machine's CPUs are refused; null is
    the process's own count), sdpa and matmul precision parsed by Flags.replace. `threads_given`: the command
    line's count replaces the record's, which is then not applied (the gate names the difference)."""
    kinds = {spec.name: spec.kind for spec in FLAG_ENTRIES}
    checked: dict[str, Any] = {}
    for name, value in flags.items():
        if name == "num_threads":
            if value is not None and not threads_given:
                try:
                    checked[name] = options.thread_count(_as_typed(value))
                except options.OptionError as exc:
                    raise BaselineError(f"{exc} (--threads N measures it with N threads here, a difference the "
                                        "gate names)") from None
        elif kinds.get(name) is bool and not isinstance(value, bool):
            raise BaselineError(f"flag {name} is {json.dumps(value)[:40]}, not true or false")
        elif kinds.get(name) is str:
            checked[name] = str(value)
        else:
            checked[name] = value
    return checked
