"""The commands that time a model: bench (a run, or its timing modes; bench --generate is cli/generation.py),
compare (an interleaved A/B; compare --baseline is the gate, cli/baseline.py), throughput and determinism."""

from __future__ import annotations

import dataclasses
import sys

from torchperf_tui.cli import common
from torchperf_tui.cli.common import (append_history, bench_config, check_history_writable, output, print_note,
                                      without)
from torchperf_tui.core.errors import TorchperfError
from torchperf_tui.cli.baseline import baseline_command, bench_record, typed_options
from torchperf_tui.cli.mlflow import log_records, log_result, open_mlflow
from torchperf_tui.engine.measurements.throughput import DEFAULT_TIME_BUDGET_S
from torchperf_tui.engine.measurements.timing_modes import parse_modes
from torchperf_tui.cli.generation import asks_generation, bench_generate, compare_generate
from torchperf_tui.wording.throughput import slo_point_line


def cmd_bench(args) -> int:
    from torchperf_tui.cli.render import ProgressLine, render_timing  # rich: not loaded for --json or a refusal

    sink = open_mlflow(args)  # --mlflow: its store checked before anything runs (one line, exit 2)
    if args.modes is None:  # the timing modes are not kept in the history; a run and a generation are
        check_history_writable(args)
    if asks_generation(args):
        return bench_generate(args, sink)
    if args.cold_l2 and args.modes is None:
        raise TorchperfError("--cold-l2 goes with --modes (it flushes the L2 between the modes' iterations)")
    cfg = bench_config(args, warmup=args.warmup, iters=args.iters, compile=args.compile, shapes=args.shapes)
    cfg = dataclasses.replace(cfg, time_budget_s=args.time_budget or None)
    if args.modes is not None:
        return bench_modes(args, cfg)
    progress = ProgressLine(enabled=sys.stderr.isatty() and not args.json)

    def samples(batch) -> None:
        if batch.samples_ms:
            progress.update(batch.phase, batch.index, batch.total, batch.samples_ms[-1])

    def timing_json(r) -> dict:
        return without(r.to_dict(), "samples_ms", "warmup_ms", unless=args.samples)

    def kept(partial) -> None:  # Ctrl-C: the samples taken, neither kept in the history nor logged
        progress.close()
        if partial.samples_ms:
            output(args, partial, render_timing, lambda r: {**timing_json(r), "record": None})

    try:  # notes about the flags and dtype on this device come first, from the measurement process
        result, extra = common.run_job("time", {"cfg": cfg}, f"timing {args.model}",
                                       on_progress=print_note, on_samples=samples, kept=kept)
    finally:
        progress.close()
    record = bench_record(args, result, extra.get("fingerprint"))
    log_records(sink, result, extra, [record] if record is not None and not args.no_history else [])
    return output(args, result, render_timing, lambda r: {**timing_json(r), "record": record and record.to_dict()})


def bench_modes(args, cfg) -> int:
    """bench --modes: the timing modes side by side (not appended to the history: a record holds one timing)."""
    from torchperf_tui.cli.render import render_modes  # rich: not loaded for --json or a refusal

    def to_json(r) -> dict:
        data = r.to_dict()
        for mode in data["modes"]:
            without(mode, "samples_ms", unless=args.samples)
        return data

    def kept(partial) -> None:  # Ctrl-C: the modes' samples taken so far
        if any(mode.samples_ms for mode in partial.modes):
            output(args, partial, render_modes, to_json)

    result, _ = common.run_job("modes", {"cfg": cfg, "modes": parse_modes(args.modes), "cold_l2": args.cold_l2,
                                          "per_block": args.per_block}, f"timing {args.model} in several modes",
                               on_progress=print_note, kept=kept)
    return output(args, result, render_modes, to_json)


def cmd_throughput(args) -> int:
    from torchperf_tui.cli.render import render_batch_try, render_throughput  # rich: not loaded for --json or a refusal

    cap = int(args.memory_cap * 1024**3) if args.memory_cap else None
    budget = DEFAULT_TIME_BUDGET_S if args.time_budget is None else (args.time_budget or None)
    if args.slo is not None:
        return throughput_slo(args, cap, budget)
    options = dict(max_batch=args.max_batch, memory_cap_bytes=cap, to_oom=args.to_oom, time_budget_s=budget)

    def progress(what: str, data) -> None:
        if what == "batch_try" and not args.json:
            render_batch_try(data)

    def kept(partial) -> None:  # Ctrl-C: the batches tried so far
        if partial.tries:
            output(args, partial, render_throughput)

    cfg, sink = bench_config(args), open_mlflow(args)
    result, extra = common.run_job("throughput", {"cfg": cfg, "options": options},
                                   f"searching the batch of {args.model}", on_progress=progress, kept=kept)
    log_result(sink, "throughput", result, extra, cfg.flags.describe(result.device))
    return output(args, result, render_throughput)


def throughput_slo(args, cap: int | None, budget: float | None) -> int:
    """throughput --slo: the largest batch within the latency budget, each batch said as it is timed (stderr)."""
    from torchperf_tui.cli.render import render_slo  # rich: not loaded for --json or a refusal

    stray = [option for option, given in (("--to-oom", args.to_oom), ("--mlflow", args.mlflow is not None)) if given]
    if stray:
        raise TorchperfError(f"{' and '.join(stray)} go{'es' if len(stray) == 1 else ''} with the search for the "
                             "most samples/s, not with --slo: leave one out")

    def progress(what: str, data) -> None:
        if what == "slo_point" and not args.json:
            print(slo_point_line(data, args.slo), file=sys.stderr)

    def kept(partial) -> None:  # Ctrl-C: the batches timed so far
        if partial.points:
            output(args, partial, render_slo)

    options = dict(max_batch=args.max_batch, memory_cap_bytes=cap, time_budget_s=budget)
    result, _ = common.run_job("slo", {"cfg": bench_config(args), "slo": args.slo, "options": options},
                               f"searching the largest batch of {args.model} within {args.slo.text()}",
                               on_progress=progress, kept=kept)
    return output(args, result, render_slo)


def cmd_compare(args) -> int:
    from torchperf_tui.cli.render import render_ab  # rich: not loaded for --json or a refusal

    if getattr(args, "baseline", None) is not None:
        check_history_writable(args)  # the run against the baseline is kept
        return baseline_command(args)
    refuse_gate_options(args)
    sink = open_mlflow(args)  # --mlflow: checked before anything runs
    if asks_generation(args):
        return compare_generate(args)
    base = bench_config(args, shapes=args.shapes, seed=args.seed)
    arm_a, arm_b = common.arms(args, base)
    if not args.kernels:  # the kernels are not kept in the history; both arms of a comparison are
        check_history_writable(args)
    params = dict(base=base, a=arm_a, b=arm_b, aa=args.aa)
    if args.kernels:
        from torchperf_tui.cli.render import render_kernels  # rich: not loaded for --json or a refusal

        kernels, _ = common.run_job("kernels", params, f"profiling the kernels of {args.model} under A and B")
        return output(args, kernels, render_kernels)
    params.update(blocks=args.blocks, per_block=args.per_block, seed=args.seed, time_budget_s=args.time_budget or None)
    result, extra = common.run_job("ab", params, f"comparing A and B on {args.model}")
    records = []
    if not args.no_history and not result.cancelled:
        records = append_history(args, result, extra.get("fingerprint"))
    log_records(sink, result, extra, records)
    return output(args, result, render_ab)


# compare's options that only the regression gate reads (compare --baseline), as typed.
GATE_OPTIONS = {"fail_if_slower": "--fail-if-slower", "baseline_filter": "--baseline-filter",
                "no_confirm": "--no-confirm", "fail_if_ambiguous": "--fail-if-ambiguous"}


def refuse_gate_options(args) -> None:
    """A gate option without --baseline would be read by nothing (`--fail-if-slower 5` on an A/B: no gate, exit 0
    whatever B's verdict), so it is refused rather than passed over."""
    typed = typed_options(args.argv) if getattr(args, "argv", None) is not None else set()
    stray = [option for dest, option in GATE_OPTIONS.items() if dest in typed]
    if stray:
        raise TorchperfError(f"{' and '.join(stray)} go{'es' if len(stray) == 1 else ''} with --baseline REF (the "
                             "regression gate): an A/B comparison has no gate; add --baseline, or leave "
                             f"{'it' if len(stray) == 1 else 'them'} out")


def cmd_determinism(args) -> int:
    cfg = bench_config(args)
    report, _ = common.run_job("determinism", {"cfg": cfg, "runs": args.runs}, f"checking {args.model}")
    return output(args, report, lambda r: print(r.summary()))


