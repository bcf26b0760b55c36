"""`torchperf-tui bench MODEL --generate N [--prompt-len P]`: greedy generation of a causal LM, timed per token, in
a measurement process of its own as every bench is (cli/timing.py hands the command here); its words are
wording/generation.py's, its record a history record of kind "generate". No torch here."""

from __future__ import annotations

import dataclasses
import sys

from torchperf_tui.core.errors import TorchperfError
from torchperf_tui.core.run_option_table import run_option
from torchperf_tui.cli import common
from torchperf_tui.cli.mlflow import log_records
from torchperf_tui.engine.measurements.generation import check_new_tokens
from torchperf_tui.wording.generation import generation_ab_rows, generation_ab_title, generation_rows, generation_title


def check_generate_args(args) -> None:
    """What the arguments alone refuse: --prompt-len or --cache without --generate, the timing modes, a prompt
    length and a sequence length that disagree, too few new tokens."""
    if args.generate is None:
        raise TorchperfError(f"{without_generate(args)} goes with --generate N (the number of new tokens to generate)")
    if args.modes is not None or args.cold_l2:
        raise TorchperfError("--generate times generation, not the timing modes: leave out --modes and --cold-l2")
    if args.prompt_len is not None and args.seq_len is not None and str(args.prompt_len) != str(args.seq_len).strip():
        raise TorchperfError(f"--prompt-len {args.prompt_len} and --seq-len {args.seq_len}: the prompt is the "
                             "sequence, give one of them")
    check_new_tokens(args.generate)


def generation_options(args) -> list[str]:
    """The options only a generation takes, as given: '--prompt-len', '--cache static' (the default cache is no
    option given)."""
    cache = getattr(args, "cache", None)
    return [*(["--prompt-len"] if getattr(args, "prompt_len", None) is not None else []),
            *([f"--cache {cache}"] if cache not in (None, run_option("cache").default) else [])]


def asks_generation(args) -> bool:
    """Whether the arguments are a generation's: --generate, or an option only a generation takes (refused without
    --generate, by check_generate_args)."""
    return getattr(args, "generate", None) is not None or bool(generation_options(args))


def without_generate(args) -> str:
    """The generation's options given without --generate: '--prompt-len', '--cache static' or both."""
    return " and ".join(generation_options(args))


def render_generation(result) -> None:
    from torchperf_tui.cli.render import print_kv  # rich: not loaded for --json or a refusal
    print_kv(generation_title(result), generation_rows(result))


def bench_generate(args, sink=None) -> int:
    """bench --generate: the prompt is the model's input at --prompt-len (else --seq-len, else its default).
    `sink`: --mlflow's open store (cli_mlflow), or None."""
    from torchperf_tui.cli.render import ProgressLine  # rich: not loaded for --json or a refusal

    check_generate_args(args)
    if args.prompt_len is not None:
        args.seq_len = str(args.prompt_len)
    cfg = common.bench_config(args, compile=args.compile, shapes=args.shapes)
    cfg = dataclasses.replace(cfg, time_budget_s=args.time_budget or None)
    progress = ProgressLine(enabled=sys.stderr.isatty() and not args.json)

    def samples(batch) -> None:
        if batch.samples_ms:
            progress.update(batch.phase, batch.index, batch.total, batch.samples_ms[-1])

    try:
        result, extra = common.run_job("generate", {"cfg": cfg, "new_tokens": args.generate},
                                 f"generating {args.generate} tokens with {args.model}",
                                 on_progress=common.print_note, on_samples=samples)
    finally:
        progress.close()
    records = []
    if not args.no_history and not result.cancelled:
        records = common.append_history(args, result, extra.get("fingerprint"))
    log_records(sink, result, extra, records)
    return common.output(args, result, render_generation,
                       lambda r: common.without(r.to_dict(), "decode_ms", "warmup_decode_ms", unless=args.samples))


def render_generation_ab(result) -> None:
    from torchperf_tui.cli.render import print_kv  # rich: not loaded for --json or a refusal
    print_kv(generation_ab_title(result), generation_ab_rows(result))


def compare_generate(args) -> int:
    """compare --generate: arms A and B generating, interleaved in blocks of one generation; not kept in the history
    (a record holds one run's latencies)."""

    if args.generate is None:
        raise TorchperfError(f"{without_generate(args)} goes with --generate N (the number of new tokens to generate)")
    if args.kernels:
        raise TorchperfError("--kernels profiles the conv layers' passes, not a generation: leave out --generate")
    args.modes, args.cold_l2 = None, False  # compare has neither: the checks bench's --generate makes
    check_generate_args(args)
    if args.prompt_len is not None:
        args.seq_len = str(args.prompt_len)
    base = common.bench_config(args, shapes=args.shapes, seed=args.seed)
    arm_a, arm_b = common.arms(args, base)
    params = dict(base=base, a=arm_a, b=arm_b, new_tokens=args.generate, blocks=args.blocks, seed=args.seed,
                  time_budget_s=args.time_budget or None, aa=args.aa)
    result, _ = common.run_job("generate_ab", params, f"comparing A and B generating with {args.model}",
                         on_progress=common.print_note)
    return common.output(args, result, render_generation_ab)
