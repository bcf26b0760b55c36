"""The CLI's arguments: the parser of `torchperf-tui` and its subcommands, with every number checked where it
enters (core/options.py). A usage error is one line and exit code 2."""

from __future__ import annotations

import argparse
import functools

from torchperf_tui.core import options
from torchperf_tui.core.errors import PROG, TorchperfError
from torchperf_tui.core.flag_table import CHOICE, ON, SWITCH, flag_options, flag_entry, spec_keys_text
from torchperf_tui.core import run_option_table
from torchperf_tui.core.run_option_table import ARM_KEYS, run_option, with_default
from torchperf_tui.core.slo import parse_slo
from torchperf_tui import __version__
from torchperf_tui.engine.workloads.inputs import parse_seq_len
from torchperf_tui.engine.workloads.model_args import parse_model_args

EXIT_BAD_INPUT = 2
EXIT_FAILURE = 1


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (the full usage stays behind --help)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(EXIT_BAD_INPUT, f"{self.prog}: error: {message} (see --help)\n")


def _checked(check, name: str | None = None):
    """An argparse type from a check in core/options.py (the one place user numbers are validated)."""
    def convert(text: str):
        try:
            return check(name, text) if name is not None else check(text)
        except options.OptionError as exc:  # argparse names the option itself: "argument --budget: must be ..."
            text = str(exc)
            raise argparse.ArgumentTypeError(text.split(": ", 1)[1] if text.startswith("--") and ": " in text
                                             else text) from None

    convert.__name__ = getattr(check, "__name__", "value")  # argparse names the type in its messages
    return convert


def _positive_float(name: str):
    return _checked(options.positive_float, name)


_positive_int = _checked(options.positive_int)
_iters = _checked(functools.partial(options.iters, name="--iters"))
_recorded = _checked(functools.partial(options.recorded_passes, name="--iters"))
_warmup = _checked(options.warmup)
_memory_cap = _checked(functools.partial(options.memory_cap_gib, name="--memory-cap"))


def _app_model_args(text: str) -> str:
    """The app's --model-args: its syntax checked here (a setting's name and value are checked by the analysis)."""
    try:
        parse_model_args(text)
    except TorchperfError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text.strip()


def _seq_len(text: str) -> str:
    """--seq-len (the app's and the commands'): a whole number >= 1 as typed; '' is refused, not the default."""
    try:
        return str(parse_seq_len(text))
    except TorchperfError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _add_run_option(p: argparse.ArgumentParser, name: str, help: str | None = None, **kwargs) -> None:
    """Run option `name` (core/run_option_table.py) as its entry says: its option, values, default and help."""
    entry = run_option(name)
    if entry.style == run_option_table.ON:
        p.add_argument(entry.option, action="store_true", help=help or entry.help)
        return
    said = dict(help=help or (with_default(name, entry.default) if entry.default is not None else entry.help),
                metavar=entry.metavar or (entry.choices and "{" + ",".join(entry.choices) + "}") or None,
                default=entry.default)
    if entry.choices:  # refused in the words a SPEC's and the engine's refusals use: 'unknown step 'fly': ...'
        said["type"] = _parsed(entry.choose)
    if entry.style == run_option_table.OPTIONAL:
        said.update(nargs="?", const=entry.const)
    p.add_argument(entry.option, **{**said, **kwargs})


def _add_cache_option(p: argparse.ArgumentParser) -> None:
    """--cache, with --generate (a static cache without it is refused: there is no cache to keep)."""
    _add_run_option(p, "cache", help="with --generate: " + with_default("cache", run_option("cache").default))


def _add_step_options(p: argparse.ArgumentParser) -> None:
    """What one timed iteration does: an inference pass or a training step, and mixed precision."""
    for name in ("step", "optimizer", "amp"):
        _add_run_option(p, name)


def _add_input_options(p: argparse.ArgumentParser, batch_help: str = "batch size") -> None:
    p.add_argument("--input", metavar="SHAPE", help="input shape with batch, e.g. 1x3x224x224 "
                   "(default: the model's own input size)")
    p.add_argument("--batch", type=_positive_int, help=f"{batch_help} (replaces the shape's first dimension)")
    _add_run_option(p, "dtype")
    p.add_argument("--seq-len", metavar="N", type=_seq_len, help="a token model's sequence length (default: the "
                   "model's own, "
                   "within its maximum positions)")
    p.add_argument("--model-args", metavar="KEY=VALUE,...", default="",
                   help="the model's overrides: settings of a transformers config (hf:), keyword arguments of a "
                        "timm or torchvision builder, e.g. num_hidden_layers=2,hidden_size=256")


def _add_workload_options(p: argparse.ArgumentParser) -> None:
    """What to run and where: the model, its input, the device and the memory format."""
    p.add_argument("model", help="a torchvision name, timm:NAME, hf:TYPE (or hf:DIRECTORY with a config.json) "
                   "or package.module:factory")
    _add_input_options(p)
    _add_run_option(p, "quant")
    _add_run_option(p, "attn")
    p.add_argument("--device", default="auto", type=_checked(options.device_name),
                   help="auto | cpu | cuda[:N] (default auto)")
    _add_run_option(p, "channels_last")


def _add_flag_options(p: argparse.ArgumentParser) -> None:
    """The flag table's options (core/flag_table.py), in its order; common.flags_from makes them the run's Flags."""
    for option, names in flag_options():
        entry = flag_entry(names[0])  # the flags an option sets are of one kind
        if option.style == SWITCH:
            p.add_argument(option.text, action=argparse.BooleanOptionalAction, default=option.default,
                           help=option.help)
        elif option.style == ON:
            p.add_argument(option.text, action="store_true", help=option.help)
        elif option.style == CHOICE:
            p.add_argument(option.text, choices=entry.choices, help=option.help)
        else:
            p.add_argument(option.text, metavar=option.metavar, type=_parsed(entry.parse), help=option.help)


def _parsed(parse):
    """An argparse type from a parse that raises TorchperfError (a flag's, a run option's choice; no torch): its
    error one line."""
    def convert(text: str):
        try:
            return parse(text)
        except TorchperfError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    convert.__name__ = getattr(parse, "__name__", "value")  # argparse names the type in its messages
    return convert


def _add_run_options(p: argparse.ArgumentParser) -> None:
    """What a measuring command's iteration does, under which flags, and --json."""
    _add_step_options(p)
    _add_flag_options(p)
    p.add_argument("--json", action="store_true", help="machine-readable output")


def _schedule(text: str) -> str:
    """--shapes: a schedule engine/workloads/shapes.py parses ('' is refused, not 'fixed'), kept as typed."""
    from torchperf_tui.engine.workloads.shapes import parse_schedule  # numpy: only the commands that need it load it

    try:
        parse_schedule(text)
    except TorchperfError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def _add_shapes_option(p: argparse.ArgumentParser) -> None:
    _add_run_option(p, "shapes", type=_schedule)


def _add_sweep_parser(sub) -> None:
    """`sweep`: a token model's latency, tokens/s and peak memory at lengths doubling from LO to HI."""
    p = sub.add_parser("sweep", help="a token model at sequence lengths doubling from LO to HI (fixed batch): "
                       "latency, tokens/s and peak memory per length, until one does not fit or the time budget "
                       "ends; --a/--b overlay two arms measured interleaved")
    p.add_argument("model", help="a token model: hf:TYPE (or hf:DIRECTORY) or a factory whose input is token ids")
    p.add_argument("--seq-lens", metavar="LO-HI", default="128-4096",
                   help="lengths: LO, 2 LO, 4 LO, ... and HI last; cut at the model's maximum positions "
                        "(default 128-4096)")
    p.add_argument("--batch", type=_positive_int, default=1, help="the batch at every length (default 1)")
    _add_run_option(p, "dtype")
    _add_run_option(p, "quant")
    _add_run_option(p, "attn")
    p.add_argument("--model-args", metavar="KEY=VALUE,...", default="",
                   help="the model's overrides, e.g. num_hidden_layers=2,hidden_size=256")
    p.add_argument("--device", default="auto", type=_checked(options.device_name),
                   help="auto | cpu | cuda[:N] (default auto)")
    p.add_argument("--iters", type=_iters, default=10, help="timed iterations per length and arm (default 10, "
                   f"at most {options.ITERS_MAX:,})")
    p.add_argument("--warmup", type=_warmup, default=2,
                   help="warm-up iterations before each length's (and arm's block's) timed ones (default 2)")
    p.add_argument("--time-budget", type=_checked(options.time_budget), metavar="SECONDS",
                   help="do not start a length that would end past this budget (default 120, as throughput's; "
                        "0: no budget)")
    p.add_argument("--memory-cap", type=_memory_cap, metavar="GIB",
                   help="CPU only: memory a length may use (default half of the available RAM)")
    p.add_argument("--a", metavar="SPEC", help="arm A of an A/B sweep, as compare's SPEC (with --b): both arms at "
                   "every length, interleaved, their curves overlaid")
    p.add_argument("--b", metavar="SPEC", help="arm B, likewise")
    p.add_argument("--seed", type=_checked(options.seed), default=0, help="seed of the token ids")
    p.set_defaults(input=None, channels_last=False, seq_len=None)  # the sweep sets the input's length itself
    _add_run_options(p)
    _add_mlflow_option(p)


def _add_collectives_parser(sub) -> None:
    """`collectives`: all-reduce, all-gather and reduce-scatter across processes, nccl-tests' algbw and busbw."""
    # psutil with the collectives' engine (40 ms): loaded for a command's parser, never on the app's first frame
    from torchperf_tui.engine.measurements import collectives

    p = sub.add_parser("collectives", help="all_reduce, all_gather and reduce_scatter across the box's GPUs (NCCL) "
                       "or across processes on the CPU (gloo) over message sizes: each size's time, algbw and "
                       "busbw (nccl-tests' definitions) against the link's peak")
    _add_rank_options(p, collectives.world_size)
    p.add_argument("--ops", metavar="OPS", default=",".join(collectives.OPS),
                   help=f"the collectives, comma-separated (default {','.join(collectives.OPS)})")
    p.add_argument("--sizes", metavar="MIN-MAX", default=collectives.DEFAULT_SIZES,
                   help="message sizes: MIN, 4 MIN, 16 MIN, ... and MAX last, in bytes with B, K, M or G "
                        f"(powers of 1024; default {collectives.DEFAULT_SIZES}, at most "
                        f"{collectives.SIZE_MAX // 1024**3}G)")
    p.add_argument("--iters", type=_iters, default=collectives.DEFAULT_ITERS,
                   help=f"timed iterations per size, each between barriers (default {collectives.DEFAULT_ITERS})")
    p.add_argument("--warmup", type=_checked(functools.partial(options.whole_number, "--warmup", low=0,
                                                               high=options.WARMUP_MAX)),
                   default=collectives.DEFAULT_WARMUP,
                   help=f"untimed iterations before each size's (default {collectives.DEFAULT_WARMUP})")
    p.add_argument("--json", action="store_true", help="machine-readable output")


def _add_rank_options(p, world_size) -> None:
    """--world (checked by `world_size`, its command's) and --device of a command whose ranks run across processes."""
    # psutil with the ranks' engine: loaded with the command's parser, as its caller's
    from torchperf_tui.engine.measurements import ranks

    p.add_argument("--world", type=_checked(world_size), metavar="N",
                   help="ranks, one process each: 2 or more (default: every GPU on CUDA, "
                        f"{ranks.DEFAULT_CPU_WORLD} on the CPU; at most {ranks.WORLD_PER_CPU} per logical CPU, and "
                        "one per GPU)")
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto",
                   help="cuda: NCCL, one GPU per rank from GPU 0 (CUDA_VISIBLE_DEVICES chooses which); cpu: gloo "
                        "across processes; auto (default): cuda where torch sees two GPUs or more")


def _add_ddp_parser(sub) -> None:
    """`ddp`: a DDP training step across processes, its compute alone and its all-reduce alone."""
    # psutil with the DDP engine, as collectives' (40 ms): for a command's parser, never on the app's first frame
    from torchperf_tui.engine.measurements import ddp

    p = sub.add_parser("ddp", help="a DDP training step across the box's GPUs (NCCL) or across processes on the "
                       "CPU (gloo): its time, the same step's compute alone, the all-reduce of its gradients alone, "
                       "the communication exposed and the share hidden behind the compute, the all-reduce's busbw")
    p.add_argument("model", help="a torchvision name, timm:NAME, hf:TYPE (or hf:DIRECTORY with a config.json) "
                   "or package.module:factory")
    _add_input_options(p, batch_help="each rank's batch, as torchvision's training references take it: the whole "
                       "step's is N times it (default 1)")
    _add_run_option(p, "optimizer")
    _add_run_option(p, "amp")
    _add_rank_options(p, ddp.world_size)
    p.add_argument("--bucket-mb", type=_checked(ddp.bucket_mb), metavar="MIB",
                   help="DDP's bucket_cap_mb: the most MiB of gradients all-reduced as one (default: DDP's own)")
    p.add_argument("--iters", type=_iters, default=ddp.DEFAULT_ITERS,
                   help=f"timed rounds, each the three parts in turn (default {ddp.DEFAULT_ITERS})")
    p.add_argument("--warmup", type=_checked(functools.partial(options.whole_number, "--warmup", low=0,
                                                               high=options.WARMUP_MAX)),
                   default=ddp.DEFAULT_WARMUP, help=f"untimed rounds before them (default {ddp.DEFAULT_WARMUP})")
    p.add_argument("--seed", type=_checked(options.seed), default=0,
                   help="seed of the weights and of rank 0's batch (rank r's: the seed + r)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(channels_last=False)


def _add_mlflow_option(p: argparse.ArgumentParser) -> None:
    """--mlflow (cli/mlflow.py logs the result)."""
    p.add_argument("--mlflow", metavar="URI", help="log the result as an MLflow run to this tracking store: "
                   "sqlite:///path/mlflow.db or a tracking server http://HOST:PORT (experiment "
                   "$MLFLOW_EXPERIMENT_NAME, default torchperf-tui; needs pip install 'torchperf-tui[mlflow]')")


def _add_exporter_parser(sub) -> None:
    """`exporter`: GPU telemetry, the host and the history's latest outcomes on /metrics for Prometheus."""
    p = sub.add_parser("exporter", help="serve GPU telemetry (DCGM exporter's names), the CPU and memory, and the "
                       "history's latest outcomes per set-up on http://HOST:PORT/metrics for Prometheus, until Ctrl-C")
    p.add_argument("--port", type=_checked(options.port), default=9400,
                   help="TCP port (default 9400, as dcgm-exporter's: choose another beside it; 0: any free port)")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to listen on (default 127.0.0.1, this machine only; 0.0.0.0 for a Prometheus "
                        "elsewhere)")
    p.add_argument("--interval", type=_checked(options.interval), default=1.0, metavar="S",
                   help="seconds between readings of the GPUs, the host and the history, 0.1-60 (default 1)")
    _add_history_file_option(p, "whose outcomes are served")


def _add_history_file_option(p: argparse.ArgumentParser, what: str) -> None:
    """--history PATH after a command that reads or writes the history, as before it (the top-level option: given
    here, it is the one that counts)."""
    p.add_argument("--history", metavar="PATH", type=_checked(options.history_path), default=argparse.SUPPRESS,
                   help=f"the history file {what} (as the top-level --history)")


def _add_baseline_options(p: argparse.ArgumentParser) -> None:
    """compare --baseline: the gate against a recorded run (cli/baseline.py)."""
    p.add_argument("--baseline", metavar="REF",
                   help="a regression gate instead of A vs B: measure REF's configuration now (model, overrides, input, "
                        "dtype, flags, step, compile, shapes, device kind, warm-up and iterations; options typed here "
                        "override it and are listed as differences) and compare the two samples. REF: a `bench MODEL "
                        "--json` file, a history file (newest timing record, or --baseline-filter's), or a record id "
                        "or unique prefix from --history's file. Exit 0 the same or faster, 1 slower past "
                        "--fail-if-slower and significant (the whole 95 %% interval past it), 2 bad input; an interval "
                        "across the limit is 'AMBIGUOUS': exit 0 (--fail-if-ambiguous: 1); a run marked disturbed (a "
                        "busy host) that reads slower past it is not judged: exit 0, 'disturbed: not judged'")
    p.add_argument("--baseline-filter", metavar="KEY=VALUE,...",
                   help="with --baseline HISTORY_FILE: the newest timing record matching every pair, e.g. "
                        "model=resnet18,dtype=float16 (keys: id, model, input_shape, dtype, device, channels_last, "
                        "compile, shapes, step, optimizer, amp, model_args, seq_len, hostname)")
    p.add_argument("--fail-if-slower", metavar="PCT", default=10.0,
                   type=_checked(lambda text: options.finite_float("--fail-if-slower", text, low=0.0)),
                   help="with --baseline: exit 1 when the median is slower than the baseline's by more than PCT "
                        "%% beyond doubt (significant, and the 95 %% interval's low end past PCT; default 10: past "
                        "the few %% two runs of one build differ by on a shared box)")
    p.add_argument("--fail-if-ambiguous", action="store_true",
                   help="with --baseline: exit 1 on an AMBIGUOUS verdict too (the 95 %% interval reaches past PCT "
                        "and the run is not past it beyond doubt), which by default passes with exit 0")
    p.add_argument("--no-confirm", action="store_true",
                   help="with --baseline: fail on the first run past PCT (by default such a run is measured again, "
                        "and the gate fails only if the second run fails it too)")


def _make_optional(p: argparse.ArgumentParser, dest: str) -> None:
    """A positional argument that may be left out (argparse fixes `required` when the action is made)."""
    for action in p._actions:
        if action.dest == dest and not action.option_strings:
            action.nargs, action.required, action.default = "?", False, None


def build_parser(commands: bool = True, baseline: bool = False) -> argparse.ArgumentParser:
    """The CLI's parser; `commands=False`: only the app's options (the twelve subcommand parsers cost
    milliseconds of the app's first frame). `baseline`: compare's MODEL, --a and --b are optional (compare
    --baseline takes them from the baseline)."""
    parser = _Parser(prog=PROG, description="How fast is this PyTorch model on this box, and why. "
                     "With no command, starts the terminal app.")
    parser.add_argument("--model", help="TUI: open with this model selected (a torchvision name, timm:NAME, hf:TYPE or "
                        "module:factory; its overrides and sequence length go in the picker's args and seq fields)")
    parser.add_argument("--autostart", action="store_true", help="TUI: start a timing run at once")
    parser.add_argument("--model-args", dest="app_model_args", metavar="KEY=VALUE,...", type=_app_model_args,
                        help="TUI: the model's overrides (its config or builder keywords), as the picker's args field")
    parser.add_argument("--seq-len", dest="app_seq_len", metavar="N", type=_seq_len,
                        help="TUI: a token model's sequence length, as the picker's seq field")
    parser.add_argument("--demo", nargs="?", const="resnet18", metavar="MODEL",
                        help="TUI: play a story hands-free on MODEL (default resnet18: the cuDNN trade-offs; a "
                             "transformers model such as hf:llama: the attention story, SDPA math against flash, "
                             "in a small config unless --model-args); any key takes over")
    parser.add_argument("--interval", type=_checked(options.interval), default=0.5,
                        help="TUI: telemetry period in seconds, 0.1-60 (default 0.5)")
    parser.add_argument("--device", dest="app_device", default="auto", type=_checked(options.device_name),
                        help="TUI: auto | cpu | cuda[:N]")
    parser.add_argument("--screenshot-dir", metavar="DIR", help="TUI: where s saves screenshots (default: "
                        "$TORCHPERF_SCREENSHOTS, else the user data directory's screenshots/)")
    parser.add_argument("--history", metavar="PATH", type=_checked(options.history_path),
                        help="run history file (JSON lines; default: $TORCHPERF_HISTORY, "
                        "else the user data directory)")
    parser.add_argument("--mlflow", dest="app_mlflow", metavar="URI", help="TUI: log every finished run as an "
                        "MLflow run to this tracking store (sqlite:///path/mlflow.db or http://HOST:PORT)")
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    if not commands:
        return parser
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    p = sub.add_parser("info", help="device facts: GPU/CPU, versions, peak FLOPS and bandwidth")
    p.add_argument("--json", action="store_true", help="machine-readable output")

    p = sub.add_parser("models", help="the model catalogue: torchvision, timm and transformers")
    p.add_argument("--source", choices=("torchvision", "timm", "hf"),
                   help="only this source (default: all three; listing hf's types takes a few seconds)")
    p.add_argument("--task", help="only this task (torchvision's classification, segmentation, video, ...; timm's "
                   "classification; hf's causal-lm or base)")
    p.add_argument("--json", action="store_true", help="machine-readable output")

    p = sub.add_parser("flops", help="parameters, size, FLOPs and MACs (on the meta device: instant)")
    p.add_argument("model", help="a torchvision name, timm:NAME, hf:TYPE (or hf:DIRECTORY with a config.json) "
                   "or package.module:factory")
    _add_input_options(p)
    p.add_argument("--layers", action="store_true", help="also the per-layer table")
    _add_run_option(p, "step", help="train: also the backward of a training step's loss, counted apart "
                    "(default infer)")
    p.add_argument("--json", action="store_true", help="machine-readable output")

    p = sub.add_parser("bench", help="latency: warm-up, then timed iterations with synchronisation")
    _add_workload_options(p)
    p.add_argument("--warmup", type=_warmup, default=10,
                   help=f"warm-up iterations, or 'auto' (default 10, at most {options.WARMUP_MAX:,}); the time "
                        "budget covers them too")
    p.add_argument("--iters", type=_iters, default=64,
                   help="timed iterations (default 64: enough for p90's 95 %% interval to lie inside the sample; "
                        f"at most {options.ITERS_MAX:,})")
    p.add_argument("--time-budget", type=_checked(options.time_budget), metavar="SECONDS", default=60.0,
                   help="stop the timed iterations once they have taken this long; the percentiles the samples "
                        "cannot support are marked (default 60; 0: no budget)")
    _add_flag_options(p)
    _add_step_options(p)
    _add_run_option(p, "compile")
    _add_shapes_option(p)
    p.add_argument("--modes", metavar="MODES",
                   help="instead of one timing: the same model in several timing modes side by side, in interleaved "
                        "rounds: sync (every iteration synchronised: one request's latency), pipelined (back to back, "
                        "one synchronisation per block: the steady state), graph (CUDA: replayed as a CUDA graph, no "
                        "launch overhead); e.g. --modes sync,pipelined,graph")
    p.add_argument("--cold-l2", action="store_true",
                   help="with --modes, CUDA: write a buffer twice the L2 size before each sync and graph iteration, "
                        "outside the timed region")
    p.add_argument("--per-block", type=_checked(options.ab_per_block), default=10,
                   help=f"with --modes: iterations per pipelined block (default 10, at most {options.AB_PER_BLOCK_MAX:,})")
    p.add_argument("--generate", type=_checked(options.new_tokens), metavar="N",
                   help="a causal LM (hf: decoders): instead of one timing, greedy generation of N new tokens with the "
                        "model's own KV cache, each token synchronised: time to first token (the prefill), per-token "
                        "latency (the decode steps), tokens/s and the cache's size; 1 warm-up and 5 timed generations")
    p.add_argument("--prompt-len", type=_positive_int, metavar="P",
                   help="with --generate: the prompt's length in tokens (default: --seq-len, else the model's own)")
    _add_cache_option(p)
    p.add_argument("--samples", action="store_true", help="with --json: include every sample")
    p.add_argument("--no-history", action="store_true", help="do not append this run to the history file")
    _add_history_file_option(p, "this run is appended to")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    _add_mlflow_option(p)

    p = sub.add_parser("ceilings", help="what this device reaches: per dtype the best of several matmuls and "
                       "convolutions (and CPU thread counts), and a large copy, "
                       "measured once and kept per device (roofline and MFU are given against them too)")
    p.add_argument("--device", default="auto", type=_checked(options.device_name),
                   help="auto | cpu | cuda[:N] (default auto)")
    p.add_argument("--refresh", action="store_true", help="measure again, even if ceilings are kept")
    p.add_argument("--threads", type=_checked(options.thread_count), metavar="N",
                   help="the CPU's: measure (and keep) at N threads alone, the count a run of --threads N looks its "
                        "ceilings up under (default: the process's count and all logical cores)")
    p.add_argument("--json", action="store_true", help="machine-readable output")

    p = sub.add_parser("throughput", help="the batch with the most samples/s, and the largest batch that fits "
                       "(doubling until samples/s stops improving, it does not fit, or the time budget)")
    _add_workload_options(p)
    p.add_argument("--max-batch", type=_checked(options.batch_bound), default=1024,
                   help="stop growing here (default 1024)")
    p.add_argument("--to-oom", action="store_true",
                   help="keep growing past the best samples/s until out of memory or --max-batch, then bisect "
                        "(finds the largest batch that fits; the time budget still applies)")
    p.add_argument("--time-budget", type=_checked(options.time_budget), metavar="SECONDS",
                   help="do not start a try that would not end within this budget, the final measurement "
                        "included (default 120; 0: no budget)")
    p.add_argument("--memory-cap", type=_memory_cap, metavar="GIB",
                   help="CPU only: memory the search may use (default half of the available RAM)")
    p.add_argument("--slo", type=_checked(parse_slo), metavar="pQ=BUDGET",
                   help="instead: the largest batch whose latency at quantile Q stays within BUDGET (e.g. p99=20ms, "
                        "p90=0.5s), each batch timed with the passes that quantile needs, every batch tried as the "
                        "frontier (p50, the quantile, items/s, goodput)")
    _add_run_options(p)
    _add_mlflow_option(p)

    p = sub.add_parser("profile", help="torch.profiler top ops by self time, and a Chrome trace for Perfetto")
    _add_workload_options(p)
    p.add_argument("--iters", type=_recorded, default=5,
                   help=f"profiled iterations (default 5, at most {options.RECORDED_MAX:,})")
    p.add_argument("--sort", default=None, help="self_cpu | self_device | cpu_total | device_total | calls | "
                   "self_cpu_memory | self_device_memory | name (default: self time on the model's device)")
    p.add_argument("--top", type=_positive_int, default=20, help="rows to show (default 20)")
    p.add_argument("--trace", metavar="PATH", help="where to write the Chrome trace (default: a temp folder)")
    _add_run_options(p)

    p = sub.add_parser("roofline", help="achieved TFLOPS, MFU, arithmetic intensity: memory- or compute-bound")
    _add_workload_options(p)
    p.add_argument("--iters", type=_iters, default=50,
                   help=f"timed iterations (default 50, at most {options.ITERS_MAX:,})")
    p.add_argument("--peak-tflops", type=_positive_float("--peak-tflops"), help="the device's peak, where it cannot be derived (CPU)")
    p.add_argument("--peak-bandwidth", type=_positive_float("--peak-bandwidth"), metavar="GB/S", help="likewise, the peak memory bandwidth")
    p.add_argument("--layers", action="store_true", help="also the per-layer table: each layer's time (profiled "
                   "again), share of the pass, achieved FLOP/s, intensity and bound, and on a GPU its busy and idle time")
    p.add_argument("--layer-iters", type=_checked(functools.partial(options.recorded_passes, name="--layer-iters")), default=5, metavar="N",
                   help=f"passes profiled for --layers (default 5, at most {options.RECORDED_MAX:,})")
    _add_run_options(p)

    p = sub.add_parser("compare", help="A vs B interleaved in randomised blocks, with a significance verdict; "
                       "or with --baseline REF, a regression gate against a recorded run",
                       description="A vs B interleaved in randomised blocks, with a significance verdict. Or a "
                       "regression gate: compare --baseline REF [--fail-if-slower PCT] [options], MODEL, --a and --b "
                       "left out (they come from the baseline): exit 0 the same or faster, 1 slower past PCT and "
                       "significant, 2 bad input.")
    _add_workload_options(p)
    if baseline:  # the model comes from the baseline (a MODEL given must be the baseline's)
        _make_optional(p, "model")
    p.add_argument("--a", required=not baseline, metavar="SPEC", help=f"arm A: key=value,... over {spec_keys_text()}, "
                   f"{', '.join(ARM_KEYS)} ('' = the base run; e.g. amp=fp16 against amp=off)")
    p.add_argument("--b", required=not baseline, metavar="SPEC", help="arm B, likewise")
    p.add_argument("--blocks", type=_checked(options.ab_blocks), default=10,
                   help=f"blocks per arm (default 10, {options.AB_BLOCKS_RANGE[0]}-{options.AB_BLOCKS_RANGE[1]:,}: with 5 pairs the signed-rank test's smallest p is 0.0625)")
    p.add_argument("--time-budget", type=_checked(options.time_budget), metavar="SECONDS",
                   default=options.AB_TIME_BUDGET_S,
                   help="do not start a block pair that would end past this budget; the verdict is from the pairs "
                        f"that ran (default {options.AB_TIME_BUDGET_S:g}; 0: no budget)")
    p.add_argument("--per-block", type=_checked(options.ab_per_block), default=None,
                   help=f"timed iterations per block (at most {options.AB_PER_BLOCK_MAX:,}; default 20, or fewer when "
                        "one pass of each arm, timed first, says all the blocks would not fit the time budget)")
    p.add_argument("--seed", type=_checked(options.seed), default=0, help="seed of the block order, random shapes and the bootstrap")
    p.add_argument("--no-history", action="store_true", help="do not append the two arms to the history file")
    _add_history_file_option(p, "the two arms are appended to, and a --baseline REF is read from")
    p.add_argument("--aa", action="store_true", help="allow identical arms: an A/A check of the noise (a "
                   "difference called significant there is a false positive); without it identical arms are refused")
    p.add_argument("--kernels", action="store_true", help="instead of timing: the kernels each conv layer and each "
                   "attention call ran under A and under B, side by side (torch.profiler; on the CPU the ATen "
                   "implementation), with any attention fallback and its reason")
    p.add_argument("--generate", type=_checked(options.new_tokens), metavar="N", help="a causal LM: instead of timing passes, each "
                   "block is a greedy generation of N new tokens; the verdict is on decode (per output token), the "
                   "prefill (time to first token) said apart")
    p.add_argument("--prompt-len", type=_positive_int, metavar="P", help="with --generate: the prompt's length")
    _add_cache_option(p)
    _add_shapes_option(p)
    _add_run_options(p)  # the base flags; each arm's SPEC applies on top
    _add_mlflow_option(p)
    _add_baseline_options(p)

    _add_sweep_parser(sub)
    _add_exporter_parser(sub)
    _add_collectives_parser(sub)
    _add_ddp_parser(sub)

    p = sub.add_parser("why", help="what costs this set-up its time: findings ranked by the time at stake per pass, "
                       "each with its evidence and a fix to paste, the top ones measured as A/Bs")
    _add_workload_options(p)
    p.add_argument("--budget", type=_checked(functools.partial(options.time_budget, name="--budget")),
                   metavar="SECONDS", default=120.0,
                   help="the whole pass: gathering the evidence and the fixes' A/Bs (default 120; 0: no budget)")
    p.add_argument("--verify", type=_checked(options.verify_count), default=3, metavar="N",
                   help="measure the fixes of the top N findings as interleaved A/Bs against the set-up as given "
                        "(default 3; 0: estimates only)")
    p.add_argument("--threshold", type=_checked(options.threshold_pct), default=5.0, metavar="PCT",
                   help="list the findings at stake for at least this share of the pass (default 5)")
    p.add_argument("--blocks", type=_checked(options.ab_blocks), default=10,
                   help="each fix's A/B: blocks per arm (default 10)")
    p.add_argument("--iters", type=_iters, default=64, help="the set-up's timed iterations (default 64)")
    p.add_argument("--warmup", type=_warmup, default=10, help="its warm-up iterations (default 10, or 'auto')")
    p.add_argument("--report", metavar="FILE",
                   help="also write the findings, their evidence and plots to FILE.md or FILE.html, one "
                        "self-contained file")
    p.add_argument("--no-history", action="store_true", help="do not keep this result in the history file")
    _add_history_file_option(p, "this result is kept in")
    _add_run_options(p)

    p = sub.add_parser("determinism", help="run the same input twice: bitwise equal, or how far apart")
    _add_workload_options(p)
    p.add_argument("--runs", type=_checked(functools.partial(options.recorded_passes, name="--runs")), default=2,
                   help="passes to compare (default 2): forward passes, or with --step train training steps from "
                        "the same state (gradients and updated weights compared)")
    _add_run_options(p)

    p = sub.add_parser("memsnap", help="CUDA only: record the allocator's history over a few iterations and write a "
                       "snapshot for pytorch.org/memory_viz")
    _add_workload_options(p)
    p.add_argument("--iters", type=_recorded, default=3,
                   help=f"recorded iterations (default 3, at most {options.RECORDED_MAX:,})")
    p.add_argument("--out", metavar="DIR", help="folder for the snapshot (default: a temp folder)")
    _add_run_options(p)

    p = sub.add_parser("history", help="past runs, newest last; --changes: where each set-up's median stepped")
    p.add_argument("--last", type=_positive_int, help="only the last N runs")
    p.add_argument("--changes", action="store_true",
                   help="the change points of each set-up's series of medians instead of the runs: the first run "
                        "after each, the medians before and after, the change with its 95 %% interval, and what "
                        "differs in the environment between the runs beside it (driver, torch, clocks, host, the "
                        "host's load); a set-up with too few runs for a segment each side is said to be too short")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    _add_history_file_option(p, "read")

    p = sub.add_parser("export", help="export the run history as json, csv, md, or for a fleet: github-benchmark "
                       "(github-action-benchmark's custom JSON) or pytorch-v3 (PyTorch OSS benchmark database rows)")
    p.add_argument("--format", required=True, choices=options.EXPORT_FORMATS,
                   help="json: full records; csv: a row per run; md: a table; github-benchmark: one entry per set-up "
                        "(its newest run), named by model, overrides, input, dtype, step, compile, quantization, "
                        "attention, KV cache, flags and device so a chart joins the same set-up across runs; "
                        "pytorch-v3: a row per metric of each run (samples, p50, p90, p99, mean, samples/s or tokens/s). These two leave cancelled runs out")
    p.add_argument("--metric", choices=options.EXPORT_METRICS,
                   help="github-benchmark's file: latency (the default: each p50 in ms, for the action's tool "
                        "customSmallerIsBetter; a generation's TTFT and per-token step) or throughput (samples/s at "
                        "p50, a generation's tokens/s: customBiggerIsBetter)")
    p.add_argument("--last", type=_positive_int, help="only the last N runs")
    p.add_argument("--output", metavar="FILE", help="write here instead of stdout ('-': stdout)")
    _add_history_file_option(p, "exported")
    return parser


def _version() -> str:
    return __version__
