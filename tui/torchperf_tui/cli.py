"""`torchperf-tui`: the TUI with no subcommand, headless subcommands for scripts.

Bad input ends in one line on stderr and exit code 2, never a traceback. The engine is imported inside each
command, so starting the TUI does not pay for torch before its first frame.

Every command that runs a model's code or measures runs its job in a measurement process, as the app does
(measure/cli_jobs.py): the model's code cannot end the command (os._exit is one line and exit 2), keep it alive
(a thread that never ends) or print into its output (its stdout goes to stderr). This process reads the
arguments, renders the engine's result and writes the history, without importing torch. `info` and `models`
run no model code and stay here (torch is imported once, here, instead of in a second process). The arguments
are parsed in cli_args.py; the results are worded by cli_render.py and cli_render_facts.py. Each command with more
than a few lines has its module (cli_facts.py, cli_history.py, cli_sweep.py, cli_baseline.py, ...).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from typing import Sequence

from torchperf_tui import cli_facts  # info, models, ceilings: this box and the catalogue, no model measured
from torchperf_tui.cli_args import EXIT_BAD_INPUT, EXIT_FAILURE, PROG, build_parser
from torchperf_tui.formatting import format_shape


def _flags_from(args):
    from torchperf_tui.engine.benchmark.flags import Flags

    flags = Flags(cudnn_benchmark=args.cudnn_benchmark, cudnn_deterministic=args.deterministic,
                  deterministic_algorithms=args.deterministic_algorithms, num_threads=args.threads)
    if args.tf32 is not None:
        flags = flags.replace(tf32_matmul=args.tf32, tf32_cudnn=args.tf32)
    attention = {k: getattr(args, k, None) for k in ("sdpa", "matmul_precision")}
    return flags.replace(**{k: v for k, v in attention.items() if v is not None})


def _print_json(data) -> None:
    print(json.dumps(data, indent=2, default=str))


def _output(args, result, render, to_json=None) -> int:
    """How every command ends: with --json its result as JSON (`to_json(result)`, else `result.to_dict()`),
    else in words (`render(result)`); exit code 0."""
    if getattr(args, "json", False):
        _print_json(to_json(result) if to_json is not None else result.to_dict())
    else:
        render(result)
    return 0


def _without(data: dict, *keys: str, unless: bool = False) -> dict:
    """`data` less `keys` (what the command was not asked for), or whole when `unless`."""
    for key in () if unless else keys:
        data.pop(key, None)
    return data


def _resolve_input(args) -> tuple[int, ...] | None:
    from torchperf_tui.engine.workloads.inputs import parse_shape

    return parse_shape(args.input) if args.input is not None else None  # '' is an error, not the default


def _model_args(args) -> tuple:
    from torchperf_tui.engine.workloads.model_args import parse_model_args

    return parse_model_args(getattr(args, "model_args", ""))


def _seq_len(args) -> int | None:
    from torchperf_tui.engine.workloads.inputs import parse_seq_len

    text = getattr(args, "seq_len", None)
    return parse_seq_len(text) if text is not None else None


def _dtype(args) -> str:
    from torchperf_tui.engine.workloads.inputs import canonical_dtype

    return canonical_dtype(args.dtype)  # 'fp16' -> 'float16'; an unknown dtype is one line here


def _run(kind: str, params: dict, what: str, **callbacks):
    """The command's job in a measurement process of its own: (result, extra), or its one-line error."""
    from torchperf_tui.measure.cli_jobs import run_job

    return run_job(kind, params, what, **callbacks)


def _print_note(what: str, data) -> None:
    if what == "note":
        print(f"{PROG}: note: {data}", file=sys.stderr)


def cmd_flops(args) -> int:
    from torchperf_tui.cli_render_facts import render_complexity

    params = dict(spec=args.model, input_shape=_resolve_input(args), batch=args.batch, dtype=_dtype(args),
                  layers=args.layers, step=args.step, model_args=_model_args(args), seq_len=_seq_len(args))
    result, _ = _run("cli.flops", params, f"analysing {args.model}", on_progress=_print_note)
    return _output(args, result, lambda r: render_complexity(r, layers=args.layers),
                   lambda r: _without(r.to_dict(), "layers", unless=args.layers))


def cmd_bench(args) -> int:
    from torchperf_tui.cli_mlflow import log_records, open_mlflow
    from torchperf_tui.cli_render import ProgressLine, render_timing

    sink = open_mlflow(args)  # --mlflow: its store checked before anything runs (one line, exit 2)
    if args.modes is None:  # the timing modes are not kept in the history; a run and a generation are
        check_history_writable(args)
    if getattr(args, "generate", None) is not None or getattr(args, "prompt_len", None) is not None:
        from torchperf_tui.cli_generation import bench_generate  # greedy generation, timed per token

        return bench_generate(args, sink)
    if args.cold_l2 and args.modes is None:
        from torchperf_tui.engine.errors import TorchperfError

        raise TorchperfError("--cold-l2 goes with --modes (it flushes the L2 between the modes' iterations)")
    cfg = _bench_config(args, warmup=args.warmup, iters=args.iters, compile=args.compile, shapes=args.shapes)
    cfg = dataclasses.replace(cfg, time_budget_s=args.time_budget or None)
    if args.modes is not None:
        return _bench_modes(args, cfg)
    progress = ProgressLine(enabled=sys.stderr.isatty() and not args.json)

    def samples(batch) -> None:
        if batch.samples_ms:
            progress.update(batch.phase, batch.index, batch.total, batch.samples_ms[-1])

    try:  # notes about the flags and dtype on this device come first, from the measurement process
        result, extra = _run("cli.bench", {"cfg": cfg}, f"timing {args.model}",
                             on_progress=_print_note, on_samples=samples)
    finally:
        progress.close()
    from torchperf_tui.cli_baseline import bench_record  # saved unless --no-history; --json carries it: a baseline

    record = bench_record(args, result, extra.get("fingerprint"))
    log_records(sink, result, extra, [record] if record is not None and not args.no_history else [])
    return _output(args, result, render_timing, lambda r: {
        **_without(r.to_dict(), "samples_ms", "warmup_ms", unless=args.samples), "record": record and record.to_dict()})


def _bench_modes(args, cfg) -> int:
    """bench --modes: the timing modes side by side (not appended to the history: a record holds one timing)."""
    from torchperf_tui.cli_render import render_modes
    from torchperf_tui.engine.benchmark.timing_modes import parse_modes  # no torch: an unknown mode is one line here

    result, _ = _run("cli.bench", {"cfg": cfg, "modes": parse_modes(args.modes), "cold_l2": args.cold_l2,
                                   "per_block": args.per_block}, f"timing {args.model} in several modes",
                     on_progress=_print_note)
    def to_json(r) -> dict:
        data = r.to_dict()
        for mode in data["modes"]:
            _without(mode, "samples_ms", unless=args.samples)
        return data

    return _output(args, result, render_modes, to_json)


def _bench_config(args, **overrides):
    """A BenchConfig from the shared input, device and flag options, through the same frozen Selection the
    TUI builds from its sidebar, with --step, --optimizer and --amp where the command has them (`overrides`:
    warmup, iters, compile, shapes, seed)."""
    from torchperf_tui.engine.workloads.shapes import parse_schedule
    from torchperf_tui.measure.selection import Selection

    full = _resolve_input(args)
    batch = args.batch if args.batch is not None else (full[0] if full else 1)
    values = dict(spec=args.model, shape=format_shape(full[1:]) if full else "", batch=str(batch),
                  device=args.device, dtype=_dtype(args), channels_last=args.channels_last,
                  flags=_flags_from(args))
    values.update({k: getattr(args, k) for k in ("step", "optimizer", "amp") if getattr(args, k, None) is not None})
    values.update(model_args=getattr(args, "model_args", "") or "", seq_len=getattr(args, "seq_len", None) or "")
    values.update({k: v for k, v in overrides.items() if v is not None})
    if "compile" in values:
        values["compile"] = values["compile"] or "eager"
    if "shapes" in values:
        values["shapes"] = parse_schedule(values["shapes"]).describe()  # a bad schedule: one line, exit 2
    return Selection(**values).config()


def cmd_throughput(args) -> int:
    from torchperf_tui.engine.benchmark.throughput import DEFAULT_TIME_BUDGET_S
    from torchperf_tui.cli_mlflow import log_result, open_mlflow
    from torchperf_tui.cli_render import render_batch_try, render_throughput

    cap = int(args.memory_cap * 1024**3) if args.memory_cap else None
    budget = DEFAULT_TIME_BUDGET_S if args.time_budget is None else (args.time_budget or None)
    options = dict(max_batch=args.max_batch, memory_cap_bytes=cap, to_oom=args.to_oom, time_budget_s=budget)

    def progress(what: str, data) -> None:
        if what == "batch_try" and not args.json:
            render_batch_try(data)

    cfg, sink = _bench_config(args), open_mlflow(args)
    result, extra = _run("throughput", {"cfg": cfg, "options": options},
                         f"searching the batch of {args.model}", on_progress=progress)
    log_result(sink, "throughput", result, extra, cfg.flags.describe(result.device))
    return _output(args, result, render_throughput)


def cmd_profile(args) -> int:
    from torchperf_tui.engine.errors import TorchperfError
    from torchperf_tui.engine.analysis.profiling import SORT_KEYS
    from torchperf_tui.cli_render import render_profile

    if args.sort is not None and args.sort not in SORT_KEYS:
        raise TorchperfError(f"unknown sort key {args.sort!r}: choose one of {', '.join(SORT_KEYS)}")
    result, _ = _run("cli.profile", {"cfg": _bench_config(args), "iters": args.iters, "sort_by": args.sort,
                                     "trace_path": args.trace}, f"profiling {args.model}")
    return _output(args, result, lambda r: render_profile(r, top=args.top), lambda r: r.to_dict(top=args.top))


def cmd_roofline(args) -> int:
    from torchperf_tui.cli_render import render_roofline

    params = {"cfg": _bench_config(args, iters=args.iters), "peak_tflops": args.peak_tflops,
              "peak_bandwidth_gbs": args.peak_bandwidth, "layers": args.layers, "layer_iters": args.layer_iters}
    result, _ = _run("cli.roofline", params, f"placing {args.model} on the roofline", on_progress=_print_note)
    return _output(args, result, lambda r: render_roofline(r, layers=args.layers),
                   lambda r: _without(r.to_dict(), "layers", unless=args.layers))


def check_history_writable(args) -> None:
    """Before a run whose records go to the history (unless --no-history): a history that cannot take them is
    one line now, exit 2 with nothing measured, rather than a "not saved" warning after the run."""
    if getattr(args, "no_history", False):
        return
    from torchperf_tui.engine.errors import TorchperfError
    from torchperf_tui.engine.records.history_file import HistoryFile

    try:
        HistoryFile(args.history).check_writable()
    except TorchperfError as exc:
        raise TorchperfError(f"{exc}: nothing was measured (--history chooses another file, --no-history keeps "
                             "none)") from None


def _append_history(args, result, fingerprint: dict | None) -> list:
    """Every completed run goes to the history at once, with the environment the measurement process saw; a
    history that cannot be written is a warning, not a lost result. -> the records saved (--mlflow tags their ids)."""
    from torchperf_tui.measure.follow_up import save_to_history

    saved: list = []
    warning = save_to_history(result, args.history, fingerprint, saved=saved)
    if warning:
        print(f"{PROG}: warning: {warning}", file=sys.stderr)
    return saved


def cmd_compare(args) -> int:
    from torchperf_tui.cli_mlflow import log_records, open_mlflow
    from torchperf_tui.cli_render import render_ab

    if getattr(args, "baseline", None) is not None:
        from torchperf_tui.cli_baseline import baseline_command  # the regression gate: exit 0, 1 or 2

        check_history_writable(args)  # the run against the baseline is kept
        return baseline_command(args)
    _refuse_gate_options(args)
    sink = open_mlflow(args)  # --mlflow: checked before anything runs
    if getattr(args, "generate", None) is not None or getattr(args, "prompt_len", None) is not None:
        from torchperf_tui.cli_generation import compare_generate  # the verdict on decode, the prefill apart

        return compare_generate(args)
    base = _bench_config(args, shapes=args.shapes, seed=args.seed)
    arm_a, arm_b = _arms(args, base)
    if not args.kernels:  # the kernels are not kept in the history; both arms of a comparison are
        check_history_writable(args)
    params = dict(base=base, a=arm_a, b=arm_b, blocks=args.blocks, per_block=args.per_block, seed=args.seed,
                  kernels=args.kernels, time_budget_s=args.time_budget or None, aa=args.aa)
    if args.kernels:
        from torchperf_tui.cli_render import render_kernels

        kernels, _ = _run("cli.compare", params, f"profiling the kernels of {args.model} under A and B")
        return _output(args, kernels, render_kernels)
    result, extra = _run("cli.compare", params, f"comparing A and B on {args.model}")
    records = []
    if not args.no_history and not result.cancelled:
        records = _append_history(args, result, extra.get("fingerprint"))
    log_records(sink, result, extra, records)
    return _output(args, result, render_ab)


# compare's options that only the regression gate reads (compare --baseline), as typed.
GATE_OPTIONS = {"fail_if_slower": "--fail-if-slower", "baseline_filter": "--baseline-filter",
                "no_confirm": "--no-confirm"}


def _refuse_gate_options(args) -> None:
    """A gate option without --baseline would be read by nothing (`--fail-if-slower 5` on an A/B: no gate, exit 0
    whatever B's verdict), so it is refused rather than passed over."""
    from torchperf_tui.cli_baseline import typed_options
    from torchperf_tui.engine.errors import TorchperfError

    typed = typed_options(args.argv) if getattr(args, "argv", None) is not None else set()
    stray = [option for dest, option in GATE_OPTIONS.items() if dest in typed]
    if stray:
        raise TorchperfError(f"{' and '.join(stray)} go{'es' if len(stray) == 1 else ''} with --baseline REF (the "
                             "regression gate): an A/B comparison has no gate; add --baseline, or leave "
                             f"{'it' if len(stray) == 1 else 'them'} out")


def _arms(args, base):
    """The arms' SPECs parsed over the base run (no torch: here, before a job is sent), and what the arguments
    alone can refuse: identical arms without --aa, and --kernels with a shape schedule."""
    from torchperf_tui.engine.benchmark.ab_arms import AA_REMEDY, parse_arm_spec, same_arms, same_arms_refusal
    from torchperf_tui.engine.errors import TorchperfError

    arm_a, arm_b = parse_arm_spec(args.a, base=base.flags), parse_arm_spec(args.b, base=base.flags)
    if same_arms(base, arm_a, arm_b) and not args.aa:
        raise TorchperfError(same_arms_refusal(AA_REMEDY))
    if args.kernels and (base.shapes != "fixed" or arm_a.shapes or arm_b.shapes):
        raise TorchperfError("--kernels profiles one input shape: leave out --shapes and shapes= in the SPECs")
    return arm_a, arm_b


def cmd_determinism(args) -> int:
    from torchperf_tui.engine.benchmark.bench_config import BenchConfig

    cfg = BenchConfig(model=args.model, input_shape=_resolve_input(args), batch=args.batch, device=args.device,
                      dtype=_dtype(args), flags=_flags_from(args), channels_last=args.channels_last, step=args.step,
                      optimizer=args.optimizer, amp=args.amp, model_args=_model_args(args), seq_len=_seq_len(args))
    report, _ = _run("cli.determinism", {"cfg": cfg, "runs": args.runs}, f"checking {args.model}")
    return _output(args, report, lambda r: print(r.summary()))


def cmd_memsnap(args) -> int:
    from torchperf_tui.cli_render import render_memsnap

    result, _ = _run("cli.memsnap", {"cfg": _bench_config(args), "iters": args.iters, "out_dir": args.out},
                     f"recording the memory of {args.model}")
    return _output(args, result, render_memsnap)


def cmd_sweep(args) -> int:
    from torchperf_tui.cli_sweep import sweep_command  # its own module: argument checks, the job, the table

    return sweep_command(args)


def cmd_history(args) -> int:
    from torchperf_tui.cli_history import history_command  # the history's commands read records: no torch

    return history_command(args)


def cmd_export(args) -> int:
    from torchperf_tui.cli_history import export_command

    return export_command(args)


def cmd_exporter(args) -> int:
    from torchperf_tui.cli_exporter import exporter_command  # no torch in this process: NVML, psutil, the history

    return exporter_command(args)


COMMANDS = {"ceilings": cli_facts.cmd_ceilings, "info": cli_facts.cmd_info, "models": cli_facts.cmd_models,
            "flops": cmd_flops, "bench": cmd_bench, "throughput": cmd_throughput, "profile": cmd_profile, "roofline": cmd_roofline,
            "compare": cmd_compare, "determinism": cmd_determinism, "memsnap": cmd_memsnap, "history": cmd_history,
            "export": cmd_export, "sweep": cmd_sweep, "exporter": cmd_exporter}


def run_tui(args) -> int:
    missing = terminal_missing()
    if missing:
        from torchperf_tui.engine.errors import TorchperfError

        raise TorchperfError(f"the app needs a terminal, and {missing}: run it in one (over SSH: ssh -t), or use a "
                             f"command for scripts (e.g. {PROG} bench MODEL)")
    from torchperf_tui.app.app import TorchperfApp

    model_args, seq_len = args.app_model_args or "", args.app_seq_len or ""
    if args.demo is not None:
        from torchperf_tui.app.demo_attention import demo_inputs  # a transformers demo's small config and length

        model_args, seq_len = demo_inputs(args.demo, model_args, seq_len)
    app = TorchperfApp(model=args.demo or args.model, autostart=args.autostart, interval=args.interval,
                       device=args.app_device, history_path=args.history, demo=args.demo is not None,
                       screenshot_dir=args.screenshot_dir, model_args=model_args, seq_len=seq_len,
                       mlflow_uri=getattr(args, "app_mlflow", None))
    app.run()
    return app.return_code or 0


def terminal_missing() -> str:
    """Why the app cannot draw or read keys here ('' when it can). Started with its output in a file or a pipe,
    the app drew escape codes into it at full speed and never saw a key: a hang that filled a disk."""
    for name, stream in (("stdin", sys.stdin), ("stdout", sys.stdout)):
        try:
            if stream is None or not stream.isatty():
                return f"its {name} is not one"
        except (AttributeError, ValueError, OSError):  # closed, or not a real file
            return f"its {name} is not one"
    return ""


def _parse(argv: list[str]) -> argparse.Namespace:
    """Starting the app needs only the top-level options; anything else (a command, help, a word that is
    neither) goes through the whole parser, which gives the usual messages."""
    if not any(a in COMMANDS or a in ("-h", "--help") for a in argv):
        args, extra = build_parser(commands=False).parse_known_args(argv)
        if not extra:
            args.command = None
            return args
    from torchperf_tui.cli_baseline import baseline_requested

    args = build_parser(baseline=baseline_requested(argv)).parse_args(argv)
    args.argv = argv  # compare --baseline tells the options typed from argparse's defaults
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse(list(sys.argv[1:] if argv is None else argv))
    from torchperf_tui.engine.errors import TorchperfError  # cheap: no torch import
    from torchperf_tui.engine.records.kept_files import HISTORY_ENV

    if getattr(args, "history", None):  # the history in use, for the measurement process too: no output of
        os.environ[HISTORY_ENV] = args.history  # either process is written over it (engine/records/kept_files.py)
    from torchperf_tui.measure.ending import Terminated, ending_on_signals

    try:
        if args.command is None:
            return run_tui(args)  # the app handles SIGTERM and SIGHUP itself (app/signals.py)
        with ending_on_signals():  # the measurement process stopped and its empty log removed on the way out
            return COMMANDS[args.command](args)
    except Terminated as exc:
        try:
            print(f"{PROG}: terminated ({exc})", file=sys.stderr)
        except (OSError, ValueError):  # SIGHUP: the terminal is gone
            pass
        return 128 + exc.signum
    except TorchperfError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # a bug, not bad input: still one line, the traceback on request
        from torchperf_tui.measure.cli_jobs import MeasurementBug

        if os.environ.get("TORCHPERF_DEBUG"):
            raise
        lines = str(exc).strip().splitlines()
        message = lines[0] if lines else ""
        if not isinstance(exc, MeasurementBug):  # that one is 'Type: message' already (the traceback: stderr)
            message = f"{type(exc).__name__}: {message}"
        print(f"{PROG}: internal error: {message} (set TORCHPERF_DEBUG=1 for the traceback)", file=sys.stderr)
        return EXIT_FAILURE


if __name__ == "__main__":
    raise SystemExit(main())
