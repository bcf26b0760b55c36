"""`--mlflow URI` on bench, compare, throughput and sweep: each finished result is one MLflow run (parameters,
metrics, the environment as tags, the samples as samples.json), in this process (no torch: MLflow imports none).

The store is opened before the measurement starts, so a bad scheme, an unreachable server or MLflow not installed is
one line and exit 2 at once, not after minutes of measuring. A run that then fails to log is a warning: the result
is printed and in the history all the same."""

from __future__ import annotations

import sys
from typing import Any

from torchperf_tui.core.errors import PROG, user_message
from torchperf_tui.core.errors import TorchperfError
from torchperf_tui.wording.history import history_line
from torchperf_tui.engine.records.mlflow_runs import describe_records, describe_sweep, describe_throughput
from torchperf_tui.engine.records.mlflow_store import MlflowSink
from torchperf_tui.engine.records.result_records import records_of

# What `--mlflow` cannot log, refused before anything runs: (the option that says it, why).
NOT_LOGGED = {"modes": "--modes gives several timings side by side, not one result",
              "kernels": "--kernels lists kernels, not timings"}


def open_mlflow(args) -> Any:
    """The open store of --mlflow (None without it), checked before the measurement: one line, exit 2."""
    uri = getattr(args, "mlflow", None)
    if uri is None:
        return None
    for option, why in NOT_LOGGED.items():
        if getattr(args, option, None):
            raise TorchperfError(f"--mlflow logs one result per run, and {why}: leave out one of them")
    if getattr(args, "command", None) == "compare" and getattr(args, "generate", None) is not None:
        raise TorchperfError("--mlflow does not log compare --generate yet: leave out one of them")
    return MlflowSink.open(uri)


def log_records(sink, result: Any, extra: dict, records: list | None) -> None:
    """A timing, a generation or an A/B by its history records: those just saved (their ids tagged), else built
    here from the measurement process's fingerprint (never taken here: that would import torch)."""
    if sink is None:
        return
    if result.cancelled:
        print(f"{PROG}: note: the run was cancelled: not logged to MLflow", file=sys.stderr)
        return
    saved = bool(records)
    records = records if saved else records_of(result, fingerprint=extra.get("fingerprint") or {})
    _write(sink, lambda: describe_records(records, saved, history_line))


def log_gate(sink, record: Any, verdict: Any, saved: bool) -> None:
    """compare --baseline: the run measured now, logged as bench's is, with the gate's verdict beside it (the ratio
    to the baseline, its interval and p as gate.* metrics, the verdict and the baseline's id as tags)."""
    if sink is None:
        return
    def describe():
        content = describe_records([record], saved, history_line)
        for name in ("ratio", "ci_low", "ci_high", "p_value", "fail_if_slower_pct", "exit_code"):
            content.metric(f"gate.{name}", getattr(verdict, name))
        outcome = (" (fails)" if verdict.failed else " (disturbed: not judged)" if verdict.not_judged
                   else " (ambiguous)" if verdict.ambiguous else "")
        content.tag("torchperf.gate", f"{verdict.verdict}{outcome}")
        content.tag("torchperf.baseline_id", verdict.baseline_id)
        return content

    _write(sink, describe)


def log_result(sink, kind: str, result: Any, extra: dict, flags_text: str = "") -> None:
    """A throughput search or a sweep (not kept in the history: their results themselves)."""
    if sink is None:
        return
    if result.cancelled:
        print(f"{PROG}: note: the run was cancelled: not logged to MLflow", file=sys.stderr)
        return
    fingerprint = extra.get("fingerprint") or {}
    if kind == "throughput":
        _write(sink, lambda: describe_throughput(result, fingerprint, flags_text))
    else:
        _write(sink, lambda: describe_sweep(result, fingerprint))


def _write(sink, describe) -> None:
    try:
        run_id = sink.write(describe())
    except TorchperfError as exc:
        print(f"{PROG}: warning: {user_message(exc)}", file=sys.stderr)
        return
    print(f"{PROG}: logged to MLflow: run {run_id} in experiment {sink.experiment!r} ({sink.uri})", file=sys.stderr)
