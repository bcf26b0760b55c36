"""The latest benchmark outcomes of the history file as Prometheus metric families: one series per distinct set-up
(model and its overrides, input, dtype, flag set, device, host), from the newest record of it.

The file is read again only when it changed (its inode, size or modification time), by the one `HistoryFile` reader
the CLI and the app use: a corrupt line is skipped and said in one warning line, a file that cannot be read keeps
the outcomes read before and says so; neither ends the exporter.

No torch and no textual here.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from datetime import datetime
from typing import Callable

from prometheus_client.core import GaugeMetricFamily, Metric

from torchperf_tui.core.errors import TorchperfError
from torchperf_tui.engine.records.history_file import HistoryFile
from torchperf_tui.engine.records.history_records import HistoryRecord

OUTCOME_LABELS = ("model", "model_args", "input", "dtype", "flags", "device", "host", "per")
LATENCY_METRIC = "torchperf_outcome_latency_seconds"
RATE_METRIC = "torchperf_outcome_samples_per_second"
ENERGY_METRIC = "torchperf_outcome_energy_joules_per_item"
TIME_METRIC = "torchperf_outcome_timestamp_seconds"
COUNT_METRIC = "torchperf_outcome_timed_samples"
HISTORY_METRICS: dict[str, str] = {
    "torchperf_history_readable": "1 when the history file was read at its last change (or is absent: no runs "
                                  "yet), 0 when it could not be read; the outcomes are then those read before.",
    "torchperf_history_records": "Records read from the history file.",
    "torchperf_history_skipped_lines": "Lines of the history file that were not records (corrupt, truncated).",
    "torchperf_history_setups": "Distinct set-ups among the records: one outcome series each.",
}
MAX_LABEL_CHARS = 200  # label values come from a file: bounded and printable


@dataclass(frozen=True)
class Outcome:
    """The newest record of one set-up, as the numbers a dashboard charts."""

    labels: tuple[str, ...]
    p50_s: float
    p90_s: float
    p99_s: float
    samples_per_s: float | None
    energy_j: float | None
    timestamp_s: float | None
    n: int


def _text(value: object) -> str:
    text = value if isinstance(value, str) else ("" if value is None else str(value))
    return "".join(ch for ch in text[:MAX_LABEL_CHARS] if ch.isprintable())


def _finite(value: object) -> float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None


def flag_set(record: HistoryRecord) -> str:
    """The flags and the run's other options that change its numbers, in one label value: 'cudnn.benchmark on ·
    channels_last · compile default'."""
    details = record.details
    parts = [record.flags_text or "defaults"]
    if record.channels_last:
        parts.append("channels_last")
    if details.get("compile_mode"):
        parts.append(f"compile {details['compile_mode']}")
    if details.get("step", "infer") != "infer":
        parts.append(f"step {details['step']} ({details.get('optimizer')})")
    if details.get("amp"):
        parts.append(f"amp {details['amp']}")
    if details.get("shapes", "fixed") != "fixed":
        parts.append(f"shapes {details['shapes']}")
    if record.kind == "generate":
        parts.append(f"generate {details.get('new_tokens')} after {details.get('prompt_len')}")
    return " · ".join(_text(part) for part in parts)


def setup_labels(record: HistoryRecord) -> tuple[str, ...]:
    """The record's set-up as the outcome's label values (OUTCOME_LABELS); two records with the same labels are the
    same set-up, so the newer one's numbers stand."""
    return (_text(record.model), _text(record.details.get("model_args", "")), _text(record.shape_text),
            _text(record.dtype), flag_set(record), _text(record.device),
            _text(record.fingerprint.get("hostname")) or "unknown",
            "token" if record.kind == "generate" else "pass")


def _timestamp(created_at: str) -> float | None:
    try:
        return datetime.fromisoformat(created_at).timestamp()
    except ValueError:
        return None


def outcomes_of(records: list[HistoryRecord]) -> list[Outcome]:
    """The newest record of each set-up (records in file order, oldest first), cancelled and sample-less ones
    left out."""
    newest: dict[tuple[str, ...], HistoryRecord] = {}
    for record in records:
        if record.stats is None or record.cancelled or record.stats.n == 0:
            continue
        newest[setup_labels(record)] = record  # a later line replaces an earlier one of the same set-up
    outcomes = []
    for labels, record in newest.items():
        stats = record.stats
        assert stats is not None
        rate = _finite(record.details.get("tokens_per_s")) if record.kind == "generate" else _finite(stats.fps)
        outcomes.append(Outcome(labels, stats.p50_ms / 1000, stats.p90_ms / 1000, stats.p99_ms / 1000, rate,
                                _finite(record.fingerprint.get("gpu_energy_per_item_j")),
                                _timestamp(record.created_at), stats.n))
    return outcomes


class OutcomeReader:
    """Follows the history file: `refresh()` reads it again when it changed; `families()` gives its outcomes."""

    def __init__(self, history: HistoryFile, warn: Callable[[str], None]) -> None:
        self.history = history
        self.warn = warn
        self._seen: tuple[int, int, int] | None = None
        self.outcomes: list[Outcome] = []
        self.records = 0
        self.skipped = 0
        self.readable = True
        self._warned: list[str] = []

    def _signature(self) -> tuple[int, int, int] | None:
        try:
            st = os.stat(self.history.path)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise TorchperfError(f"cannot read the history file {self.history.path}: {exc.strerror or exc}") from None
        return (st.st_ino, st.st_size, st.st_mtime_ns)

    def refresh(self, strict: bool = False) -> None:
        """Read the history again if it changed. `strict` (at start): a file that cannot be read raises the
        TorchperfError; later it is a warning and the outcomes read before stay."""
        try:
            signature = self._signature()
            if signature == self._seen and self._seen is not None:
                return
            result = self.history.load() if signature is not None else None
        except TorchperfError as exc:
            if strict:
                raise
            if self.readable:  # one warning when it turns unreadable, not one per interval
                self.warn(f"{exc} (the outcomes read before stay)")
            self.readable = False
            return
        self._seen = signature
        self.readable = True
        if result is None:
            self.outcomes, self.records, self.skipped = [], 0, 0
            return
        if result.warnings != self._warned:  # a corrupt line is said once, not again at every run appended after it
            for line in result.warnings:
                self.warn(line)
            self._warned = list(result.warnings)
        self.outcomes = outcomes_of(result.records)
        self.records, self.skipped = len(result.records), result.skipped

    def families(self) -> list[Metric]:
        labels = OUTCOME_LABELS
        latency = GaugeMetricFamily(LATENCY_METRIC, "Latency of one timed iteration at the quantile (a pass, or per "
                                    "output token where per=token), newest record of the set-up (in s).",
                                    labels=(*labels, "quantile"))
        rate = GaugeMetricFamily(RATE_METRIC, "Samples (input items) per second over the timed iterations; tokens "
                                 "per second where per=token.", labels=labels)
        energy = GaugeMetricFamily(ENERGY_METRIC, "GPU energy per inference or training sample over the timed "
                                   "windows, where the record has it (in J).", labels=labels)
        when = GaugeMetricFamily(TIME_METRIC, "When the set-up's newest record finished (Unix time, in s).",
                                 labels=labels)
        count = GaugeMetricFamily(COUNT_METRIC, "Timed iterations behind the set-up's figures.", labels=labels)
        for outcome in self.outcomes:
            for quantile, value in (("0.5", outcome.p50_s), ("0.9", outcome.p90_s), ("0.99", outcome.p99_s)):
                latency.add_metric([*outcome.labels, quantile], value)
            if outcome.samples_per_s is not None:
                rate.add_metric(list(outcome.labels), outcome.samples_per_s)
            if outcome.energy_j is not None:
                energy.add_metric(list(outcome.labels), outcome.energy_j)
            if outcome.timestamp_s is not None:
                when.add_metric(list(outcome.labels), outcome.timestamp_s)
            count.add_metric(list(outcome.labels), outcome.n)
        history = []
        values = {"torchperf_history_readable": 1 if self.readable else 0, "torchperf_history_records": self.records,
                  "torchperf_history_skipped_lines": self.skipped, "torchperf_history_setups": len(self.outcomes)}
        for name, text in HISTORY_METRICS.items():
            family = GaugeMetricFamily(name, text, labels=("path",))
            family.add_metric([_text(str(self.history.path))], values[name])
            history.append(family)
        return [latency, rate, energy, when, count, *history]
