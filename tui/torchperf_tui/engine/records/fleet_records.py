"""What both fleet formats (engine/records/export_fleet.py: github-action-benchmark's; export_pytorch_v3.py: the
PyTorch OSS benchmark database's) need of a record: the name of its set-up, like for like, and its figures as plain
finite numbers, and the JSON text they are written as. No torch here: `export` reads the history without it.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any, Iterable

from torchperf_tui.engine.records.history_records import HistoryRecord
from torchperf_tui.core.formatting import printable
from torchperf_tui.core.flag_table import FLAG_ENTRIES, device_applicability
from torchperf_tui.core.run_option_table import run_option

GITHUB_BENCHMARK = "github-benchmark"
PYTORCH_V3 = "pytorch-v3"
FLEET_FORMATS = (GITHUB_BENCHMARK, PYTORCH_V3)

# What each kind of record was made by, as the CLI names it: a benchmark's name in the v3 rows, and a prefix of
# the set-up's name where it is not a plain bench (an A/B arm's blocks interleave with the other arm's).
COMMANDS = {"timing": "bench", "ab": "compare", "generate": "generate"}
MAX_TEXT = 120  # a text field from the history file, cut: a bad record can hold a megabyte in one


@dataclass(frozen=True)
class LatencyFamily:
    """One kind of latency a record measured: a pass (bench, compare), or a generation's time to first token and
    its per-token decode steps. Every number finite; `samples_ms` the raw samples (may be empty)."""

    key: str  # "latency", "ttft", "per_token": the v3 metric names' stem
    label: str  # "", "TTFT", "per token": in the github-benchmark name
    n: int
    p50_ms: float
    p90_ms: float | None
    p99_ms: float | None
    mean_ms: float | None
    iqr_ms: float | None
    samples_ms: tuple[float, ...]


@dataclass(frozen=True)
class Rate:
    """A record's throughput: samples/s at the median latency, or a generation's tokens/s."""

    key: str  # "samples_per_s", "tokens_per_s"
    unit: str  # "samples/s", "tokens/s"
    value: float


def finite(value: Any) -> float | None:
    """`value` as a float when it is a finite number (not a boolean), else None: records are read from a file."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            number = float(value)
        except OverflowError:
            return None
        return number if math.isfinite(number) else None
    return None


def clean_text(value: Any, limit: int = MAX_TEXT) -> str:
    """A text field from a record, made printable (formatting.printable) and bounded ('' for what is not a
    string)."""
    if not isinstance(value, str):
        return ""
    text = printable(value).strip()
    return text if len(text) <= limit else text[:limit - 3] + "..."


def exported(records: Iterable[HistoryRecord]) -> list[HistoryRecord]:
    """The records the fleet formats carry: every finished run. A cancelled run is left out: its numbers cover
    part of a run, and a chart or a regression query would read them as a whole one."""
    return [r for r in records if not r.cancelled]


def latency_families(record: HistoryRecord) -> list[LatencyFamily]:
    """The record's latencies: a pass's for bench and compare records; a generation's TTFT and per-token steps."""
    families = []
    if record.kind == "generate":
        ttft = record.details.get("ttft_stats")
        raw = record.details.get("ttft_ms")
        samples = [finite(v) for v in raw] if isinstance(raw, list) else []
        family = _family("ttft", "TTFT", ttft if isinstance(ttft, dict) else None, samples)
        if family is not None:
            families.append(family)
        per_token = "per_token", "per token"
    else:
        per_token = "latency", ""
    stats = record.stats
    family = _family(*per_token, None if stats is None else vars(stats), record.samples_ms)
    if family is not None:
        families.append(family)
    return families


def _family(key: str, label: str, stats: dict[str, Any] | None, samples: list[Any]) -> LatencyFamily | None:
    if stats is None or finite(stats.get("p50_ms")) is None:
        return None
    n = stats.get("n")
    return LatencyFamily(key=key, label=label, n=n if isinstance(n, int) and not isinstance(n, bool) else 0,
                         p50_ms=finite(stats["p50_ms"]), p90_ms=finite(stats.get("p90_ms")),
                         p99_ms=finite(stats.get("p99_ms")), mean_ms=finite(stats.get("mean_ms")),
                         iqr_ms=finite(stats.get("iqr_ms")),
                         samples_ms=tuple(v for v in map(finite, samples) if v is not None))


def rate(record: HistoryRecord) -> Rate | None:
    """samples/s at the median (the rate beside 'p50 30 ms'), or a generation's tokens/s; None when not finite."""
    if record.kind == "generate":
        value = finite(record.details.get("tokens_per_s"))
        return None if value is None else Rate("tokens_per_s", "tokens/s", value)
    value = None if record.stats is None else finite(record.stats.fps_at_median)
    return None if value is None else Rate("samples_per_s", "samples/s", value)


def device_kind(record: HistoryRecord) -> str:
    """'cuda' or 'cpu': the device's kind, without its index (which GPU of a box is not a set-up)."""
    return "cuda" if record.device.startswith("cuda") else clean_text(record.device.split(":", 1)[0], 20) or "cpu"


def device_name(record: HistoryRecord) -> str:
    name = clean_text(record.fingerprint.get("device_name"), 80)
    return "" if name.startswith("n/a") else name


def setup_flags(record: HistoryRecord) -> str:
    """The flags that differ from PyTorch's defaults and act on the record's device ('defaults' when none), and on
    the CPU the thread count that ran: from the record's flags, not its flags_text, whose wording ('(default)')
    says how the count was chosen, which is not the set-up."""
    kind = device_kind(record)
    parts = []
    for spec in FLAG_ENTRIES:
        if spec.name not in record.flags or not device_applicability(spec.name, kind)[0]:
            continue
        value = record.flags[spec.name]
        if spec.name == "num_threads":
            parts.append(f"threads={value if isinstance(value, int) and not isinstance(value, bool) else 'default'}")
        elif value != spec.default:
            shown = ("on" if value else "off") if isinstance(value, bool) else clean_text(str(value), 40)
            parts.append(f"{spec.label}={shown}")
    return ", ".join(parts) if parts else "defaults"


def setup_name(record: HistoryRecord) -> str:
    """The record's set-up in one line, the same for every run of it and different for any other: 'resnet18
    (depth=2) 1x3x224x224 float32 channels_last, train (adamw), amp bf16, compile default, quant int8wo [threads=2]
    on cpu Intel Xeon'. A compare arm starts 'compare', a generation says its new tokens (and a static KV cache)."""
    details = record.details
    head = clean_text(record.model)
    if clean_text(details.get("model_args")):
        head += f" ({clean_text(details.get('model_args'))})"
    head += f" {record.shape_text} {clean_text(record.dtype, 20)}"
    extras = ["channels_last"] if record.channels_last else []
    if details.get("step", "infer") == "train":
        extras.append(f"train ({clean_text(details.get('optimizer'), 20) or 'sgd'})")
    if clean_text(details.get("amp"), 20):
        extras.append(f"amp {clean_text(details.get('amp'), 20)}")
    if clean_text(details.get("compile_mode"), 40):
        extras.append(f"compile {clean_text(details.get('compile_mode'), 40)}")
    for option in ("quant", "attn", "cache"):  # what the model computes, or how: another set-up unless the default
        value = clean_text(details.get(option), 40)
        if value and value != run_option(option).default:
            extras.append(f"{option} {value}")
    if details.get("shapes", "fixed") != "fixed" and clean_text(details.get("shapes")):
        extras.append(f"shapes {clean_text(details.get('shapes'))}")
    if record.kind == "generate" and finite(details.get("new_tokens")) is not None:
        extras.append(f"{int(details['new_tokens'])} new tokens")
    if extras:
        head += " " + ", ".join(extras)
    prefix = "" if record.kind == "timing" else f"{COMMANDS.get(record.kind, clean_text(record.kind, 20))} "
    device = device_kind(record) + (f" {device_name(record)}" if device_name(record) else "")
    return f"{prefix}{head} [{setup_flags(record)}] on {device}"


def to_json(data: Any) -> str:
    """The export's text: non-finite numbers never reach it (the builders drop them; this refuses any left), nor a
    raw control character (written as its JSON escape: formatting.printable)."""
    return printable(json.dumps(data, indent=2, ensure_ascii=False, allow_nan=False), json=True) + "\n"
