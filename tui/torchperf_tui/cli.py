"""`torchperf-tui`: the TUI with no subcommand, headless subcommands for scripts.

Bad input ends in one line on stderr and exit code 2, never a traceback. The engine is imported inside each
command, so starting the TUI does not pay for torch before its first frame.

Every command that runs a model's code or measures runs its job in a measurement process, as the app does
(jobs/cli_jobs.py): the model's code cannot end the command (os._exit is one line and exit 2), keep it alive
(a thread that never ends) or print into its output (its stdout goes to stderr). This process reads the
arguments, renders the engine's result and writes the history, without importing torch. `info` and `models`
run no model code and stay here (torch is imported once, here, instead of in a second process).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from typing import Sequence

from torchperf_tui import options
from torchperf_tui.formatting import format_shape

EXIT_BAD_INPUT = 2
EXIT_FAILURE = 1
PROG = "torchperf-tui"


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (the full usage stays behind --help)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(EXIT_BAD_INPUT, f"{self.prog}: error: {message} (see --help)\n")


def _checked(check, name: str | None = None):
    """An argparse type from a check in options.py (the one place user numbers are validated)."""
    def convert(text: str):
        try:
            return check(name, text) if name is not None else check(text)
        except options.OptionError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    convert.__name__ = getattr(check, "__name__", "value")  # argparse names the type in its messages
    return convert


def _positive_float(name: str):
    return _checked(options.positive_float, name)


_positive_int = _checked(options.positive_int)


def _add_step_options(p: argparse.ArgumentParser) -> None:
    """What one timed iteration does: an inference pass or a training step, and mixed precision."""
    p.add_argument("--step", choices=("infer", "train"), default="infer",
                   help="what one iteration does: infer (a forward pass, the default) or train (forward, loss, "
                        "backward, optimizer step; gradients set to None between steps)")
    p.add_argument("--optimizer", choices=("sgd", "adamw"), default="sgd",
                   help="the training step's optimizer (default sgd with momentum 0.9)")
    p.add_argument("--amp", choices=("fp16", "bf16"),
                   help="mixed precision: torch.autocast around forward and loss (a gradient scaler for fp16 "
                        "training); not --dtype, which casts the whole model")


def _add_input_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--input", metavar="SHAPE", help="input shape with batch, e.g. 1x3x224x224 "
                   "(default: the model's own input size)")
    p.add_argument("--batch", type=_positive_int, help="batch size (replaces the shape's first dimension)")
    p.add_argument("--dtype", default="float32", help="float32 | float16 | bfloat16 (default float32)")


def _add_workload_options(p: argparse.ArgumentParser) -> None:
    """What to run and where: the model, its input, the device and the memory format."""
    p.add_argument("model", help="torchvision model name or package.module:factory")
    _add_input_options(p)
    p.add_argument("--device", default="auto", type=_checked(options.device_name),
                   help="auto | cpu | cuda[:N] (default auto)")
    p.add_argument("--channels-last", action="store_true", help="channels_last memory format")


def _add_flag_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--cudnn-benchmark", action=argparse.BooleanOptionalAction, default=False,
                   help="torch.backends.cudnn.benchmark (default off)")
    p.add_argument("--deterministic", action="store_true", help="torch.backends.cudnn.deterministic")
    p.add_argument("--deterministic-algorithms", action="store_true",
                   help="torch.use_deterministic_algorithms(True)")
    p.add_argument("--tf32", action=argparse.BooleanOptionalAction, default=None,
                   help="allow TF32 for fp32 matmuls and convolutions (default: PyTorch's)")
    p.add_argument("--threads", type=_checked(options.thread_count),
                   help="CPU intra-op threads (torch.set_num_threads), at most the machine's logical CPUs")


def _add_shapes_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--shapes", default="fixed", metavar="SCHEDULE",
                   help="input shapes of the timed iterations: fixed | cycle:K[:LO-HI] | random[:LO-HI[:batch=B1-B2]] "
                        "(default fixed; cudnn.benchmark re-tunes for every new shape)")


def _flags_from(args):
    from torchperf_tui.engine.flags import Flags

    flags = Flags(cudnn_benchmark=args.cudnn_benchmark, cudnn_deterministic=args.deterministic,
                  deterministic_algorithms=args.deterministic_algorithms, num_threads=args.threads)
    if args.tf32 is not None:
        flags = flags.replace(tf32_matmul=args.tf32, tf32_cudnn=args.tf32)
    return flags


def build_parser(commands: bool = True) -> argparse.ArgumentParser:
    """The CLI's parser; `commands=False`: only the app's options (the twelve subcommand parsers cost
    milliseconds of the app's first frame)."""
    parser = _Parser(prog=PROG, description="How fast is this PyTorch model on this box, and why. "
                     "With no command, starts the terminal app.")
    parser.add_argument("--model", help="TUI: open with this model selected (torchvision name or module:factory)")
    parser.add_argument("--autostart", action="store_true", help="TUI: start a timing run at once")
    parser.add_argument("--demo", nargs="?", const="resnet18", metavar="MODEL",
                        help="TUI: play the cuDNN trade-offs hands-free on MODEL (default resnet18); any key takes over")
    parser.add_argument("--interval", type=_checked(options.interval), default=0.5,
                        help="TUI: telemetry period in seconds, 0.1-60 (default 0.5)")
    parser.add_argument("--device", dest="app_device", default="auto", type=_checked(options.device_name),
                        help="TUI: auto | cpu | cuda[:N]")
    parser.add_argument("--screenshot-dir", metavar="DIR", help="TUI: where s saves screenshots (default: "
                        "$TORCHPERF_SCREENSHOTS, else the user data directory's screenshots/)")
    parser.add_argument("--history", metavar="PATH", type=_checked(options.history_path),
                        help="run history file (JSON lines; default: $TORCHPERF_HISTORY, "
                        "else the user data directory)")
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    if not commands:
        return parser
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    p = sub.add_parser("info", help="device facts: GPU/CPU, versions, peak FLOPS and bandwidth")
    p.add_argument("--json", action="store_true", help="machine-readable output")

    p = sub.add_parser("models", help="the model catalogue")
    p.add_argument("--task", help="only this task (classification, segmentation, video, ...)")
    p.add_argument("--json", action="store_true", help="machine-readable output")

    p = sub.add_parser("flops", help="parameters, size, FLOPs and MACs (on the meta device: instant)")
    p.add_argument("model", help="torchvision model name or package.module:factory")
    _add_input_options(p)
    p.add_argument("--layers", action="store_true", help="also the per-layer table")
    p.add_argument("--step", choices=("infer", "train"), default="infer",
                   help="train: also the backward of a training step's loss, counted apart (default infer)")
    p.add_argument("--json", action="store_true", help="machine-readable output")

    p = sub.add_parser("bench", help="latency: warm-up, then timed iterations with synchronisation")
    _add_workload_options(p)
    p.add_argument("--warmup", type=_checked(options.warmup), default=10,
                   help="warm-up iterations, or 'auto' (default 10)")
    p.add_argument("--iters", type=_positive_int, default=64,
                   help="timed iterations (default 64: enough for p90's 95 %% interval to lie inside the sample)")
    p.add_argument("--time-budget", type=_checked(options.time_budget), metavar="SECONDS", default=60.0,
                   help="stop the timed iterations once they have taken this long; the percentiles the samples "
                        "cannot support are marked (default 60; 0: no budget)")
    _add_flag_options(p)
    _add_step_options(p)
    p.add_argument("--compile", nargs="?", const="default", metavar="MODE",
                   help="time the torch.compile'd model (default | reduce-overhead (CUDA graphs) | max-autotune); "
                        "compile time is reported apart")
    _add_shapes_option(p)
    p.add_argument("--modes", metavar="MODES",
                   help="instead of one timing: the same model in several timing modes side by side, in interleaved "
                        "rounds: sync (every iteration synchronised: one request's latency), pipelined (back to back, "
                        "one synchronisation per block: the steady state), graph (CUDA: replayed as a CUDA graph, no "
                        "launch overhead); e.g. --modes sync,pipelined,graph")
    p.add_argument("--cold-l2", action="store_true",
                   help="with --modes, CUDA: write a buffer twice the L2 size before each sync and graph iteration, "
                        "outside the timed region")
    p.add_argument("--per-block", type=_positive_int, default=10,
                   help="with --modes: iterations per pipelined block (default 10)")
    p.add_argument("--samples", action="store_true", help="with --json: include every sample")
    p.add_argument("--no-history", action="store_true", help="do not append this run to the history file")
    p.add_argument("--json", action="store_true", help="machine-readable output")

    p = sub.add_parser("ceilings", help="what this device reaches: per dtype the best of several matmuls and "
                       "convolutions (and CPU thread counts), and a large copy, "
                       "measured once and kept per device (roofline and MFU are given against them too)")
    p.add_argument("--device", default="auto", type=_checked(options.device_name),
                   help="auto | cpu | cuda[:N] (default auto)")
    p.add_argument("--refresh", action="store_true", help="measure again, even if ceilings are kept")
    p.add_argument("--json", action="store_true", help="machine-readable output")

    p = sub.add_parser("throughput", help="the batch with the most samples/s, and the largest batch that fits "
                       "(doubling until samples/s stops improving, it does not fit, or the time budget)")
    _add_workload_options(p)
    p.add_argument("--max-batch", type=_positive_int, default=1024, help="stop growing here (default 1024)")
    p.add_argument("--to-oom", action="store_true",
                   help="keep growing past the best samples/s until out of memory or --max-batch, then bisect "
                        "(finds the largest batch that fits; the time budget still applies)")
    p.add_argument("--time-budget", type=_checked(options.time_budget), metavar="SECONDS",
                   help="do not start a try that would not end within this budget, the final measurement "
                        "included (default 120; 0: no budget)")
    p.add_argument("--memory-cap", type=_positive_float("--memory-cap"), metavar="GIB",
                   help="CPU only: memory the search may use (default half of the available RAM)")
    _add_step_options(p)
    _add_flag_options(p)
    p.add_argument("--json", action="store_true", help="machine-readable output")

    p = sub.add_parser("profile", help="torch.profiler top ops by self time, and a Chrome trace for Perfetto")
    _add_workload_options(p)
    p.add_argument("--iters", type=_positive_int, default=5, help="profiled iterations (default 5)")
    p.add_argument("--sort", default=None, help="self_cpu | self_device | cpu_total | device_total | calls | "
                   "self_cpu_memory | self_device_memory | name (default: self time on the model's device)")
    p.add_argument("--top", type=_positive_int, default=20, help="rows to show (default 20)")
    p.add_argument("--trace", metavar="PATH", help="where to write the Chrome trace (default: a temp folder)")
    _add_step_options(p)
    _add_flag_options(p)
    p.add_argument("--json", action="store_true", help="machine-readable output")

    p = sub.add_parser("roofline", help="achieved TFLOPS, MFU, arithmetic intensity: memory- or compute-bound")
    _add_workload_options(p)
    p.add_argument("--iters", type=_positive_int, default=50, help="timed iterations (default 50)")
    p.add_argument("--peak-tflops", type=_positive_float("--peak-tflops"), help="the device's peak, where it cannot be derived (CPU)")
    p.add_argument("--peak-bandwidth", type=_positive_float("--peak-bandwidth"), metavar="GB/S", help="likewise, the peak memory bandwidth")
    p.add_argument("--layers", action="store_true", help="also the per-layer table: each layer's time (profiled "
                   "again), share of the pass, achieved FLOP/s, intensity and bound, and on a GPU its busy and idle time")
    p.add_argument("--layer-iters", type=_positive_int, default=5, metavar="N",
                   help="passes profiled for --layers (default 5)")
    _add_step_options(p)
    _add_flag_options(p)
    p.add_argument("--json", action="store_true", help="machine-readable output")

    p = sub.add_parser("compare", help="A vs B interleaved in randomised blocks, with a significance verdict")
    _add_workload_options(p)
    p.add_argument("--a", required=True, metavar="SPEC", help="arm A: key=value,... over cudnn_benchmark, "
                   "deterministic, tf32, threads, mkldnn, dtype, channels_last, shapes, step, optimizer, amp "
                   "('' = the base run; e.g. amp=fp16 against amp=off)")
    p.add_argument("--b", required=True, metavar="SPEC", help="arm B, likewise")
    p.add_argument("--blocks", type=_checked(options.ab_blocks), default=10,
                   help="blocks per arm (default 10, 6-10000: with 5 pairs the signed-rank test's smallest p is 0.0625)")
    p.add_argument("--time-budget", type=_checked(options.time_budget), metavar="SECONDS",
                   default=options.AB_TIME_BUDGET_S,
                   help="do not start a block pair that would end past this budget; the verdict is from the pairs "
                        f"that ran (default {options.AB_TIME_BUDGET_S:g}; 0: no budget)")
    p.add_argument("--per-block", type=_checked(options.ab_per_block), default=20,
                   help=f"timed iterations per block (default 20, at most {options.AB_PER_BLOCK_MAX})")
    p.add_argument("--seed", type=_checked(options.seed), default=0, help="seed of the block order, random shapes and the bootstrap")
    p.add_argument("--no-history", action="store_true", help="do not append the two arms to the history file")
    p.add_argument("--aa", action="store_true", help="allow identical arms: an A/A check of the noise (a "
                   "difference called significant there is a false positive); without it identical arms are refused")
    p.add_argument("--kernels", action="store_true", help="instead of timing: the kernels each conv layer ran under "
                   "A and under B, side by side (torch.profiler; on the CPU the ATen implementation)")
    _add_shapes_option(p)
    _add_step_options(p)
    _add_flag_options(p)  # the base flags; each arm's SPEC applies on top
    p.add_argument("--json", action="store_true", help="machine-readable output")

    p = sub.add_parser("determinism", help="run the same input twice: bitwise equal, or how far apart")
    _add_workload_options(p)
    p.add_argument("--runs", type=_positive_int, default=2,
                   help="passes to compare (default 2): forward passes, or with --step train training steps from "
                        "the same state (gradients and updated weights compared)")
    _add_step_options(p)
    _add_flag_options(p)
    p.add_argument("--json", action="store_true", help="machine-readable output")

    p = sub.add_parser("memsnap", help="CUDA only: record the allocator's history over a few iterations and write a "
                       "snapshot for pytorch.org/memory_viz")
    _add_workload_options(p)
    p.add_argument("--iters", type=_positive_int, default=3, help="recorded iterations (default 3)")
    p.add_argument("--out", metavar="DIR", help="folder for the snapshot (default: a temp folder)")
    _add_step_options(p)
    _add_flag_options(p)
    p.add_argument("--json", action="store_true", help="machine-readable output")

    p = sub.add_parser("history", help="past runs, newest last")
    p.add_argument("--last", type=_positive_int, help="only the last N runs")
    p.add_argument("--json", action="store_true", help="machine-readable output")

    p = sub.add_parser("export", help="export the run history as json, csv or md")
    p.add_argument("--format", required=True, choices=("json", "csv", "md"))
    p.add_argument("--last", type=_positive_int, help="only the last N runs")
    p.add_argument("--output", metavar="FILE", help="write here instead of stdout ('-': stdout)")
    return parser


def _version() -> str:
    from torchperf_tui import __version__

    return __version__


def _print_json(data) -> None:
    print(json.dumps(data, indent=2, default=str))


def _resolve_input(args) -> tuple[int, ...] | None:
    from torchperf_tui.engine.inputs import parse_shape

    return parse_shape(args.input) if args.input is not None else None  # '' is an error, not the default


def _dtype(args) -> str:
    from torchperf_tui.engine.inputs import canonical_dtype

    return canonical_dtype(args.dtype)  # 'fp16' -> 'float16'; an unknown dtype is one line here


def _run(kind: str, params: dict, what: str, **callbacks):
    """The command's job in a measurement process of its own: (result, extra), or its one-line error."""
    from torchperf_tui.jobs.cli_jobs import run_job

    return run_job(kind, params, what, **callbacks)


def _print_note(what: str, data) -> None:
    if what == "note":
        print(f"{PROG}: note: {data}", file=sys.stderr)


def cmd_info(args) -> int:
    from torchperf_tui.engine.device import probe_device
    from torchperf_tui.cli_render import render_device_report

    report = probe_device()
    kept = _kept_ceilings(report)
    if args.json:
        _print_json({**report.to_dict(),
                     "measured_ceilings": {device: c.to_dict() if c else None for device, c in kept.items()}})
    else:
        render_device_report(report, kept)
    return 0


def _kept_ceilings(report) -> dict:
    """The measured ceilings kept for the CPU and each CUDA device (None: none yet); nothing is measured here.
    An unreadable ceilings file is a warning, not a failed `info`."""
    from torchperf_tui.engine.ceilings import kept_for
    from torchperf_tui.engine.errors import TorchperfError

    devices = ["cpu"] + ([f"cuda:{gpu.index}" for gpu in report.gpus] if report.cuda_available else [])
    kept = {}
    for device in devices:
        try:
            kept[device] = kept_for(device)
        except TorchperfError as exc:
            print(f"{PROG}: warning: measured ceilings of {device}: {exc}", file=sys.stderr)
            kept[device] = None
    return kept


def cmd_models(args) -> int:
    from dataclasses import asdict

    from torchperf_tui.engine.models import list_catalogue  # an unknown task is its ModelError
    from torchperf_tui.cli_render import render_catalogue

    entries = list_catalogue(args.task)
    if args.json:
        _print_json([asdict(e) for e in entries])
    else:
        render_catalogue(entries)
    return 0


def cmd_flops(args) -> int:
    from torchperf_tui.cli_render import render_complexity

    params = dict(spec=args.model, input_shape=_resolve_input(args), batch=args.batch, dtype=_dtype(args),
                  layers=args.layers, step=args.step)
    result, _ = _run("cli.flops", params, f"analysing {args.model}", on_progress=_print_note)
    if args.json:
        data = result.to_dict()
        if not args.layers:
            data.pop("layers", None)
        _print_json(data)
    else:
        render_complexity(result, layers=args.layers)
    return 0


def cmd_bench(args) -> int:
    from torchperf_tui.cli_render import ProgressLine, render_timing

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
    if not args.no_history and not result.cancelled:
        _append_history(args, result, extra.get("fingerprint"))
    if args.json:
        data = result.to_dict()
        if not args.samples:
            data.pop("samples_ms", None)
            data.pop("warmup_ms", None)
        _print_json(data)
    else:
        render_timing(result)
    return 0


def _bench_modes(args, cfg) -> int:
    """bench --modes: the timing modes side by side (not appended to the history: a record holds one timing)."""
    from torchperf_tui.cli_render import render_modes
    from torchperf_tui.engine.timing_modes import parse_modes  # no torch: an unknown mode is one line here

    result, _ = _run("cli.bench", {"cfg": cfg, "modes": parse_modes(args.modes), "cold_l2": args.cold_l2,
                                   "per_block": args.per_block}, f"timing {args.model} in several modes",
                     on_progress=_print_note)
    if args.json:
        data = result.to_dict()
        if not args.samples:
            for mode in data["modes"]:
                mode.pop("samples_ms", None)
        _print_json(data)
    else:
        render_modes(result)
    return 0


def _bench_config(args, **overrides):
    """A BenchConfig from the shared input, device and flag options, through the same frozen Selection the
    TUI builds from its sidebar, with --step, --optimizer and --amp where the command has them (`overrides`:
    warmup, iters, compile, shapes, seed)."""
    from torchperf_tui.engine.shapes import parse_schedule
    from torchperf_tui.jobs.selection import Selection

    full = _resolve_input(args)
    batch = args.batch if args.batch is not None else (full[0] if full else 1)
    values = dict(spec=args.model, shape=format_shape(full[1:]) if full else "", batch=str(batch),
                  device=args.device, dtype=_dtype(args), channels_last=args.channels_last,
                  flags=_flags_from(args))
    values.update({k: getattr(args, k) for k in ("step", "optimizer", "amp") if getattr(args, k, None) is not None})
    values.update({k: v for k, v in overrides.items() if v is not None})
    if "compile" in values:
        values["compile"] = values["compile"] or "eager"
    if "shapes" in values:
        values["shapes"] = parse_schedule(values["shapes"]).describe()  # a bad schedule: one line, exit 2
    return Selection(**values).config()


def cmd_throughput(args) -> int:
    from torchperf_tui.engine.throughput import DEFAULT_TIME_BUDGET_S
    from torchperf_tui.cli_render import render_batch_try, render_throughput

    cap = int(args.memory_cap * 1024**3) if args.memory_cap else None
    budget = DEFAULT_TIME_BUDGET_S if args.time_budget is None else (args.time_budget or None)
    options = dict(max_batch=args.max_batch, memory_cap_bytes=cap, to_oom=args.to_oom, time_budget_s=budget)

    def progress(what: str, data) -> None:
        if what == "batch_try" and not args.json:
            render_batch_try(data)

    result, _ = _run("throughput", {"cfg": _bench_config(args), "options": options},
                     f"searching the batch of {args.model}", on_progress=progress)
    if args.json:
        _print_json(result.to_dict())
    else:
        render_throughput(result)
    return 0


def cmd_profile(args) -> int:
    from torchperf_tui.engine.errors import TorchperfError
    from torchperf_tui.engine.profiling import SORT_KEYS
    from torchperf_tui.cli_render import render_profile

    if args.sort is not None and args.sort not in SORT_KEYS:
        raise TorchperfError(f"unknown sort key {args.sort!r}: choose one of {', '.join(SORT_KEYS)}")
    result, _ = _run("cli.profile", {"cfg": _bench_config(args), "iters": args.iters, "sort_by": args.sort,
                                     "trace_path": args.trace}, f"profiling {args.model}")
    if args.json:
        _print_json(result.to_dict(top=args.top))
    else:
        render_profile(result, top=args.top)
    return 0


def cmd_ceilings(args) -> int:
    from torchperf_tui.cli_render import render_ceilings

    result, _ = _run("cli.ceilings", {"device": args.device, "refresh": args.refresh}, "measuring the ceilings")
    if args.json:
        _print_json(result.to_dict())
    else:
        render_ceilings(result)
    return 0


def cmd_roofline(args) -> int:
    from torchperf_tui.cli_render import render_roofline

    params = {"cfg": _bench_config(args, iters=args.iters), "peak_tflops": args.peak_tflops,
              "peak_bandwidth_gbs": args.peak_bandwidth, "layers": args.layers, "layer_iters": args.layer_iters}
    result, _ = _run("cli.roofline", params, f"placing {args.model} on the roofline")
    if args.json:
        data = result.to_dict()
        if not args.layers:
            data.pop("layers", None)
        _print_json(data)
    else:
        render_roofline(result, layers=args.layers)
    return 0


def _append_history(args, result, fingerprint: dict | None) -> None:
    """Every completed run goes to the history at once, with the environment the measurement process saw; a
    history that cannot be written is a warning, not a lost result."""
    from torchperf_tui.jobs.follow_up import save_to_history

    warning = save_to_history(result, args.history, fingerprint)
    if warning:
        print(f"{PROG}: warning: {warning}", file=sys.stderr)


def _load_history(args, last: int | None = None):
    """The history's records (with `last`, only the newest, read from the end of the file); bad lines are one
    warning line. A history that is not a regular file is a TorchperfError: exit 2."""
    from torchperf_tui.engine.history_file import History

    loaded = History(args.history).load(last=last)
    for warning in loaded.warnings:
        print(f"{PROG}: warning: {warning}", file=sys.stderr)
    return loaded


def cmd_compare(args) -> int:
    from torchperf_tui.cli_render import render_ab

    base = _bench_config(args, shapes=args.shapes, seed=args.seed)
    arm_a, arm_b = _arms(args, base)
    params = dict(base=base, a=arm_a, b=arm_b, blocks=args.blocks, per_block=args.per_block, seed=args.seed,
                  kernels=args.kernels, time_budget_s=args.time_budget or None)
    if args.kernels:
        from torchperf_tui.cli_render import render_kernels

        kernels, _ = _run("cli.compare", params, f"profiling the conv kernels of {args.model} under A and B")
        if args.json:
            _print_json(kernels.to_dict())
        else:
            render_kernels(kernels)
        return 0
    result, extra = _run("cli.compare", params, f"comparing A and B on {args.model}")
    if not args.no_history and not result.cancelled:
        _append_history(args, result, extra.get("fingerprint"))
    if args.json:
        _print_json(result.to_dict())
    else:
        render_ab(result)
    return 0


def _arms(args, base):
    """The arms' SPECs parsed over the base run (no torch: here, before a job is sent), and what the arguments
    alone can refuse: identical arms without --aa, and --kernels with a shape schedule."""
    from torchperf_tui.engine.abtest import parse_arm_spec, same_arms, same_arms_refusal
    from torchperf_tui.engine.errors import TorchperfError

    arm_a, arm_b = parse_arm_spec(args.a, base=base.flags), parse_arm_spec(args.b, base=base.flags)
    if same_arms(base, arm_a, arm_b) and not args.aa:
        raise TorchperfError(same_arms_refusal("--aa runs an A/A check of the noise on purpose"))
    if args.kernels and (base.shapes != "fixed" or arm_a.shapes or arm_b.shapes):
        raise TorchperfError("--kernels profiles one input shape: leave out --shapes and shapes= in the SPECs")
    return arm_a, arm_b


def cmd_determinism(args) -> int:
    from torchperf_tui.engine.timing import BenchConfig

    cfg = BenchConfig(model=args.model, input_shape=_resolve_input(args), batch=args.batch, device=args.device,
                      dtype=_dtype(args), flags=_flags_from(args), channels_last=args.channels_last, step=args.step,
                      optimizer=args.optimizer, amp=args.amp)
    report, _ = _run("cli.determinism", {"cfg": cfg, "runs": args.runs}, f"checking {args.model}")
    if args.json:
        _print_json(report.to_dict())
    else:
        print(report.summary())
    return 0


def cmd_memsnap(args) -> int:
    from torchperf_tui.formatting import format_bytes

    result, _ = _run("cli.memsnap", {"cfg": _bench_config(args), "iters": args.iters, "out_dir": args.out},
                     f"recording the memory of {args.model}")
    if args.json:
        _print_json(result.to_dict())
    else:
        print(f"{result.model} on {result.device}, input {format_shape(result.input_shape)}: "
              f"{result.iters} iterations recorded, peak allocated {format_bytes(result.peak_allocated_bytes)}, "
              f"{result.entries} allocator events")
        print(f"snapshot: {result.path}" if result.path else "no snapshot written (cancelled)")
        print(result.viewer_hint)
    return 0


def cmd_history(args) -> int:
    from torchperf_tui.engine.export import export_records

    loaded = _load_history(args, last=args.last)
    records = loaded.records
    if args.json:
        print(export_records(records, "json"))
    elif not records:
        print(f"no runs recorded yet ({loaded.path})")
    else:
        for record in records:
            print(record.summary())
    return 0


def cmd_export(args) -> int:
    from torchperf_tui.engine.export import export_records

    loaded = _load_history(args, last=args.last)
    records = loaded.records
    text = export_records(records, args.format)
    if args.output is not None and args.output != "-":  # '-' is stdout, as for most tools, not a file named '-'
        from torchperf_tui.engine.output_files import write_text

        write_text(args.output, text)  # beside the target, then renamed; a non-regular target is refused
        print(f"wrote {len(records)} runs to {args.output}", file=sys.stderr)
    else:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
    return 0


COMMANDS = {"ceilings": cmd_ceilings, "info": cmd_info, "models": cmd_models, "flops": cmd_flops, "bench": cmd_bench,
            "throughput": cmd_throughput, "profile": cmd_profile, "roofline": cmd_roofline,
            "compare": cmd_compare, "determinism": cmd_determinism, "memsnap": cmd_memsnap, "history": cmd_history,
            "export": cmd_export}


def run_tui(args) -> int:
    missing = terminal_missing()
    if missing:
        from torchperf_tui.engine.errors import TorchperfError

        raise TorchperfError(f"the app needs a terminal, and {missing}: run it in one (over SSH: ssh -t), or use a "
                             f"command for scripts (e.g. {PROG} bench MODEL)")
    from torchperf_tui.app.app import TorchperfApp

    app = TorchperfApp(model=args.demo or args.model, autostart=args.autostart, interval=args.interval,
                       device=args.app_device, history_path=args.history, demo=args.demo is not None,
                       screenshot_dir=args.screenshot_dir)
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
    return build_parser().parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse(list(sys.argv[1:] if argv is None else argv))
    from torchperf_tui.engine.errors import TorchperfError  # cheap: no torch import

    try:
        if args.command is None:
            return run_tui(args)
        return COMMANDS[args.command](args)
    except TorchperfError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # a bug, not bad input: still one line, the traceback on request
        from torchperf_tui.jobs.cli_jobs import MeasurementBug

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
