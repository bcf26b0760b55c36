"""`compare --baseline REF [--fail-if-slower PCT]`: a regression gate for CI, and the record `bench --json` carries
so that its output is a baseline.

The gate reads the baseline (engine/records/baseline.py), measures its configuration now in a measurement process
as `bench` does, with the options typed on the command line over it (only those typed: argparse's defaults do not
override a baseline), saves the new run to the history, and words the verdict (engine/records/baseline_gate.py,
wording/baseline.py). Exit 0 the same or faster, 1 slower past PCT and significant (the whole interval past it), 2
bad input (one line); an interval across PCT is "AMBIGUOUS", exit 0 (--fail-if-ambiguous: 1); a run marked disturbed
that reads slower past PCT is not judged (exit 0, the verdict says "disturbed: not judged").

The baseline file's settings are checked as the same options typed would be (engine/records/baseline.py,
config_of_record), before the measurement process starts.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Sequence

from torchperf_tui.cli.args import build_parser
from torchperf_tui.core.errors import PROG, TorchperfError
from torchperf_tui.core.flag_table import flag_options, gate_name
from torchperf_tui.cli import common
from torchperf_tui.cli.mlflow import log_gate, open_mlflow
from torchperf_tui.cli.render import print_line
from torchperf_tui.engine.records.baseline import BaselineError, config_of_record, resolve_baseline
from torchperf_tui.engine.records.baseline_gate import gate
from torchperf_tui.engine.records.result_records import records_of
from torchperf_tui.engine.workloads.shapes import parse_schedule
from torchperf_tui.measure.follow_up import save_to_history
from torchperf_tui.wording.baseline import gate_lines

# What a baseline run cannot be combined with: the A/B's own options.
_AB_ONLY = (("a", "--a"), ("b", "--b"), ("kernels", "--kernels"), ("generate", "--generate"),
            ("prompt_len", "--prompt-len"))


def baseline_requested(argv: Sequence[str]) -> bool:
    """Whether the command line is `compare ... --baseline REF` (then MODEL, --a and --b are optional)."""
    return "compare" in argv and any(a == "--baseline" or a.startswith("--baseline=") for a in argv)


def typed_options(argv: Sequence[str]) -> set[str]:
    """The destinations of compare's options that `argv` actually typed (not argparse's defaults): the same
    parser again with every default suppressed, so an option left out leaves no attribute."""
    parser = build_parser(baseline=True)
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    compare = sub.choices["compare"]
    for action in compare._actions:
        action.default = argparse.SUPPRESS
    namespace = parser.parse_args(list(argv))
    # An absent optional positional (MODEL) still gets a value, None: not typed either.
    typed = {dest for dest, value in vars(namespace).items() if value not in (argparse.SUPPRESS, None)}
    return typed & {action.dest for action in compare._actions}


def overridden(cfg, args, typed: set[str]) -> tuple[Any, list[str]]:
    """`cfg` (the baseline's configuration) with the typed options over it, and their names as the gate's
    differences say them (input_shape, dtype, threads, ...)."""
    import dataclasses


    changes: dict[str, Any] = {}
    names: list[str] = []
    if "input" in typed:
        changes["input_shape"] = common.resolve_input(args)
    if "batch" in typed:
        changes["batch"] = args.batch
    if typed & {"input", "batch"}:
        names.append("input_shape")
    simple = {"dtype": lambda: common.dtype(args), "device": lambda: args.device, "channels_last": lambda: True,
              "step": lambda: args.step, "optimizer": lambda: args.optimizer, "amp": lambda: args.amp,
              "quant": lambda: args.quant, "attn": lambda: args.attn,
              "model_args": lambda: common.model_args(args), "seq_len": lambda: common.seq_len(args),
              "shapes": lambda: _schedule(args.shapes), "seed": lambda: args.seed}
    for dest, value in simple.items():
        if dest in typed:
            changes[dest] = value()
            names.append(dest)
    flags = {}
    for option, flag_names in flag_options():  # the flag table's options (core/flag_table.py)
        if option.dest in typed and getattr(args, option.dest) is not None:
            flags.update(dict.fromkeys(flag_names, getattr(args, option.dest)))
            names += [gate_name(name) for name in flag_names]
    if flags:
        changes["flags"] = cfg.flags.replace(**flags)
    if "time_budget" in typed:
        changes["time_budget_s"] = args.time_budget or None
    return dataclasses.replace(cfg, **changes), names


def _schedule(text: str) -> str:
    return parse_schedule(text).describe()  # a bad schedule: one line, exit 2


def baseline_command(args) -> int:
    """The gate: the baseline's configuration measured now, the verdict, and its exit code. A run that would fail
    the gate is measured once more (unless --no-confirm), and the gate fails only if that run fails it too: a
    regression is confirmed before a build is stopped, as TorchBench confirms one before it files an issue; a burst
    of load from another process does not last two runs as a slower build does. A run marked disturbed (a busy
    host) that reads slower past the limit is not judged: exit 0 with the verdict "disturbed: not judged", so a CI
    job on a loaded runner does not go red for noise (engine/records/baseline_gate.py)."""
    for dest, option in _AB_ONLY:
        if getattr(args, dest, None) not in (None, False):
            raise BaselineError(f"{option} is not for --baseline, which measures the baseline's configuration "
                                "(leave out --a, --b, --kernels and --generate)")
    baseline = resolve_baseline(args.baseline, args.history, args.baseline_filter)
    record = baseline.record
    if args.model is not None and args.model != record.model:
        raise BaselineError(f"the baseline {record.short_id} ran {record.model}, and this command names "
                            f"{args.model}: a gate measures the baseline's model again (leave MODEL out)")
    typed = typed_options(getattr(args, "argv", None) or sys.argv[1:])
    cfg, typed_names = overridden(config_of_record(record, source=baseline.source, threads_given="threads" in typed),
                                  args, typed)
    _check_device_kind(record, cfg.device)
    sink = open_mlflow(args)  # --mlflow: its store checked before anything runs

    def verdict_of_a_run():
        now = measure_now(args, cfg, record)
        return now, gate(record, now, fail_if_slower_pct=args.fail_if_slower,
                         fail_if_ambiguous=args.fail_if_ambiguous, source=baseline.source, typed=typed_names,
                         seed=args.seed)

    now, verdict = verdict_of_a_run()
    if (verdict.failed or verdict.not_judged) and not args.no_confirm:
        marked = ", in a run marked disturbed" if verdict.not_judged else ""
        reading = (f"ambiguous ({verdict.change_pct:+.1f} %)" if verdict.ambiguous
                   else f"{verdict.change_pct:.1f} % slower")
        print(f"{PROG}: note: {reading} against the baseline{marked}: measuring again to confirm (--no-confirm: not)",
              file=sys.stderr)
        first = verdict
        now, verdict = verdict_of_a_run()
        outcome = "confirmed" if verdict.failed else "not judged" if verdict.not_judged else "not confirmed"
        first_run = first.now_id[:8] + (", disturbed" if first.disturbed else "")
        verdict.notes.insert(0, f"{outcome}: the first run ({first_run}) read ratio {first.ratio:.3f} (95 % CI "
                                f"{first.ci_low:.3f}-{first.ci_high:.3f}), this verdict is the second run's")
    log_gate(sink, now, verdict, saved=not args.no_history)
    if args.json:
        print(json.dumps({**verdict.to_dict(), "record": now.to_dict()}, indent=2, default=str))
    else:
        for line in gate_lines(verdict):
            print_line(line)
    return verdict.exit_code


def measure_now(args, cfg, record):
    """The baseline's configuration (`cfg`) timed now, as bench times it; its record, saved unless --no-history.
    (The gate's one call into the measurement process: a test puts a fake here to force a disturbed run.)"""
    try:
        result, extra = common.run_job("time", {"cfg": cfg}, f"timing {record.model} as baseline {record.short_id} ran",
                             on_progress=common.print_note)
    except TorchperfError as exc:
        if record.device.startswith("cuda") and "no CUDA device" in str(exc):
            raise BaselineError(_other_device(record, "this machine has no CUDA device")) from None
        raise
    if result.cancelled or not result.samples_ms:
        raise TorchperfError("the run ended before any timed sample: no verdict")
    now = records_of(result, extra.get("fingerprint"))[0]
    _check_device_kind(record, now.device)
    if not args.no_history:
        _save(args, result, now)
    return now


def _kind(device: str) -> str:
    return device.split(":", 1)[0]


def _check_device_kind(record, device: str) -> None:
    if device != "auto" and _kind(device) != _kind(record.device):
        raise BaselineError(_other_device(record, f"this run is on {device}"))


def _other_device(record, here: str) -> str:
    name = record.fingerprint.get("device_name")
    ran = f"{record.device} ({name})" if isinstance(name, str) and name else record.device
    return f"the baseline {record.short_id} ran on {ran}, and {here}: a gate compares runs on the same kind of device"


def _save(args, result, record) -> None:
    warning = save_to_history(result, args.history, records=[record])
    if warning:
        print(f"{PROG}: warning: {warning}", file=sys.stderr)


def bench_record(args, result, fingerprint: dict | None):
    """The history record of a finished bench run, saved unless --no-history; bench --json carries it (a
    baseline for compare --baseline). None for a cancelled run."""
    if result.cancelled:
        return None
    record = records_of(result, fingerprint)[0]
    if not args.no_history:
        _save(args, result, record)
    return record
