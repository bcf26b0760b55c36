"""What the CLI's commands share: the run described from the shared options, the job sent to a measurement
process, how a result is printed (words or --json), notes and the history. No torch here."""

from __future__ import annotations

import json
import sys
from typing import Any, Callable

from torchperf_tui.core.errors import PROG
from torchperf_tui.core.errors import TorchperfError
from torchperf_tui.core.flag_table import flag_options
from torchperf_tui.core.run_option_table import run_option
from torchperf_tui.engine.measurements.ab_arms import AA_REMEDY, parse_arm_spec, same_arms, same_arms_refusal
from torchperf_tui.engine.measurements.flags import Flags
from torchperf_tui.engine.records.history_file import HistoryFile
from torchperf_tui.engine.measurements.bench_config import BenchConfig
from torchperf_tui.engine.workloads.inputs import canonical_dtype, check_dims, parse_seq_len, parse_shape
from torchperf_tui.engine.workloads.model_args import parse_model_args
from torchperf_tui.engine.workloads.shapes import parse_schedule
from torchperf_tui.measure.follow_up import save_to_history


def flags_from(args) -> Flags:
    """The flag options as the run's Flags: each option of the flag table (core/flag_table.py) sets the flags
    that name it; one left out (None) leaves them at their defaults."""
    changes = {}
    for option, names in flag_options():
        value = getattr(args, option.dest, None)
        if value is not None:
            changes.update(dict.fromkeys(names, value))
    return Flags().replace(**changes)


def print_json(data) -> None:
    print(json.dumps(data, indent=2, default=str))


def output(args, result, render, to_json=None) -> int:
    """How every command ends: with --json its result as JSON (`to_json(result)`, else `result.to_dict()`),
    else in words (`render(result)`); exit code 0."""
    if getattr(args, "json", False):
        print_json(to_json(result) if to_json is not None else result.to_dict())
    else:
        render(result)
    return 0


def without(data: dict, *keys: str, unless: bool = False) -> dict:
    """`data` less `keys` (what the command was not asked for), or whole when `unless`."""
    for key in () if unless else keys:
        data.pop(key, None)
    return data


def resolve_input(args) -> tuple[int, ...] | None:
    return parse_shape(args.input) if args.input is not None else None  # '' is an error, not the default


def model_args(args) -> tuple:
    return parse_model_args(getattr(args, "model_args", ""))


def seq_len(args) -> int | None:
    text = getattr(args, "seq_len", None)
    return parse_seq_len(text) if text is not None else None


def dtype(args) -> str:
    return canonical_dtype(args.dtype)  # 'fp16' -> 'float16'; an unknown dtype is one line here


def run_job(kind: str, params: dict, what: str, *, kept: Callable[[Any], Any] | None = None, **callbacks):
    """The command's job in a measurement process of its own: (result, extra), or its one-line error. `kept(result)`
    shows what a job that Ctrl-C ended had measured (a search's batches so far), before the interrupt goes on up
    (exit 130)."""
    # Local: the job client and its process machinery load only once a job runs; a refused command loads none.
    from torchperf_tui.measure import cli_jobs

    try:
        return cli_jobs.run_job(kind, params, what, **callbacks)
    except cli_jobs.Interrupted as stop:
        if kept is not None:
            show_whole(kept, stop.result)
        raise


def show_whole(show: Callable[[Any], Any], result: Any) -> None:
    """`show(result)` as the command ends on Ctrl-C: written whole (a second Ctrl-C waits until it is, so --json is
    never cut in two), and never in the interrupt's way (a reader gone, a closed pipe: the command still ends
    'interrupted', exit 130)."""
    import signal

    # Held off this thread (a write in progress is not broken off), and ignored should another thread take it.
    before = signal.signal(signal.SIGINT, lambda signum, frame: None)
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        show(result)
        sys.stdout.flush()
    except (OSError, SystemExit):  # rich ends a write to a gone reader with SystemExit(1)
        pass
    finally:
        signal.signal(signal.SIGINT, before)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})  # one held meanwhile lands: the same end


def run_jobs(steps):
    """The command's jobs one after another in one measurement process (measure/cli_jobs.run_jobs)."""
    # Local: as run_job's, a refused command loads no job client.
    from torchperf_tui.measure import cli_jobs

    return cli_jobs.run_jobs(steps)


def print_note(what: str, data) -> None:
    """A job's note (on_progress), one line on stderr."""
    if what == "note":
        print(f"{PROG}: note: {data}", file=sys.stderr)


def bench_config(args, **overrides) -> BenchConfig:
    """The run's spec, built once from the arguments: the model and its overrides, the input, device, dtype and
    flags, --step, --optimizer and --amp where the command has them, and `overrides` (warmup, iters, compile,
    shapes, seed) where given. Each value is checked as it is read, with the same words as the app's fields."""
    full = resolve_input(args)
    run = {k: v for k, v in overrides.items() if v is not None}
    run.update({k: getattr(args, k) for k in ("step", "optimizer", "amp") if getattr(args, k, None) is not None})
    chosen_dtype, flags = dtype(args), flags_from(args)
    if "compile" in run:
        run["compile"] = run_option("compile").run_value(run["compile"])
    if "shapes" in run:
        run["shapes"] = parse_schedule(run["shapes"]).describe()  # a bad schedule: one line, exit 2
    batch = check_dims((args.batch if args.batch is not None else (full[0] if full else 1),))[0]
    return BenchConfig(model=args.model, input_shape=check_dims((batch, *full[1:])) if full else None, batch=batch,
                       device=args.device, dtype=chosen_dtype, channels_last=args.channels_last, flags=flags,
                       model_args=model_args(args), seq_len=seq_len(args), quant=getattr(args, "quant", None),
                       attn=getattr(args, "attn", None),
                       cache=getattr(args, "cache", None) or run_option("cache").default, **run)


def check_history_writable(args) -> None:
    """Before a run whose records go to the history (unless --no-history): a history that cannot take them is
    one line now, exit 2 with nothing measured, rather than a "not saved" warning after the run."""
    if getattr(args, "no_history", False):
        return
    try:
        HistoryFile(args.history).check_writable()
    except TorchperfError as exc:
        raise TorchperfError(f"{exc}: nothing was measured (--history chooses another file, --no-history keeps "
                             "none)") from None


def append_history(args, result, fingerprint: dict | None) -> list:
    """Every completed run goes to the history at once, with the environment the measurement process saw; a
    history that cannot be written is a warning, not a lost result. -> the records saved (--mlflow tags their ids)."""
    saved: list = []
    warning = save_to_history(result, args.history, fingerprint, saved=saved)
    if warning:
        print(f"{PROG}: warning: {warning}", file=sys.stderr)
    return saved


def arms(args, base):
    """The arms' SPECs parsed over the base run (no torch: here, before a job is sent), and what the arguments
    alone can refuse: identical arms without --aa, and --kernels with a shape schedule."""
    arm_a, arm_b = parse_arm_spec(args.a, base=base.flags), parse_arm_spec(args.b, base=base.flags)
    if same_arms(base, arm_a, arm_b) and not args.aa:
        raise TorchperfError(same_arms_refusal(AA_REMEDY))
    if args.kernels and (base.shapes != "fixed" or arm_a.shapes or arm_b.shapes):
        raise TorchperfError("--kernels profiles one input shape: leave out --shapes and shapes= in the SPECs")
    return arm_a, arm_b
