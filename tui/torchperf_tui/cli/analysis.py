"""The commands that say why it is this fast: flops (the complexity on the meta device), profile, roofline (and the
time per layer) and memsnap."""

from __future__ import annotations

from torchperf_tui.cli import common
from torchperf_tui.cli.common import bench_config, dtype, model_args, output, print_note, resolve_input, seq_len, without
from torchperf_tui.core.errors import TorchperfError
from torchperf_tui.engine.analysis.profiling import SORT_KEYS


def cmd_flops(args) -> int:
    from torchperf_tui.cli.render_facts import render_complexity  # rich: not loaded for --json or a refusal

    params = dict(model=args.model, input_shape=resolve_input(args), batch=args.batch, dtype=dtype(args),
                  layers=args.layers, step=args.step, model_args=model_args(args), seq_len=seq_len(args))
    result, _ = common.run_job("analyse", params, f"analysing {args.model}", on_progress=print_note)
    return output(args, result, lambda r: render_complexity(r, layers=args.layers),
                   lambda r: without(r.to_dict(), "layers", unless=args.layers))


def cmd_profile(args) -> int:
    from torchperf_tui.cli.render import render_profile  # rich: not loaded for --json or a refusal

    if args.sort is not None and args.sort not in SORT_KEYS:
        raise TorchperfError(f"unknown sort key {args.sort!r}: choose one of {', '.join(SORT_KEYS)}")
    result, _ = common.run_job("profile", {"cfg": bench_config(args), "iters": args.iters, "sort_by": args.sort,
                                          "trace_path": args.trace}, f"profiling {args.model}")
    return output(args, result, lambda r: render_profile(r, top=args.top), lambda r: r.to_dict(top=args.top))


def cmd_roofline(args) -> int:
    from torchperf_tui.cli.render import render_roofline  # rich: not loaded for --json or a refusal

    cfg, what = bench_config(args, iters=args.iters), f"placing {args.model} on the roofline"

    def steps(job):
        """The app's three jobs, in one measurement process: the kept ceilings (a corrupt file a note, the roofline
        then goes on without), a timing, and its roofline (with each layer's time for --layers)."""
        measured, _ = job("ceilings_kept", {"device": cfg.device}, what, on_progress=print_note)
        timing, _ = job("time", {"cfg": cfg}, what)  # its notes are bench's, not the roofline's
        peaks = {"peak_tflops": args.peak_tflops, "peak_bandwidth_gbs": args.peak_bandwidth, "measured": measured}
        if args.layers:
            return job("layer_times", {"result": timing, "iters": args.layer_iters, **peaks}, what)[0]
        return job("roofline", {"result": timing, **peaks}, what)[0]

    result = common.run_jobs(steps)
    return output(args, result, lambda r: render_roofline(r, layers=args.layers),
                   lambda r: without(r.to_dict(), "layers", unless=args.layers))


def cmd_memsnap(args) -> int:
    from torchperf_tui.cli.render import render_memsnap  # rich: not loaded for --json or a refusal

    result, _ = common.run_job("memsnap", {"cfg": bench_config(args), "iters": args.iters, "out_dir": args.out},
                                f"recording the memory of {args.model}")
    return output(args, result, render_memsnap)


