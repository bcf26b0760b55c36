"""Timing fidelity on a transformers decoder: this engine's median against torch.utils.benchmark timing the same
forward (`model(**inputs)`: token ids and the attention mask), in one process, alternating round by round.

The model is built as every command builds it (`hf:llama` from AutoConfig.for_model with overrides, random weights,
nothing downloaded) and fed what the engine makes for it (InputSpec: int64 ids below the vocabulary, a mask of
ones). Both timers run under torch.inference_mode, as the engine's inference pass does, on the same number of
threads (torch.utils.benchmark.Timer's `num_threads`). Budget (../shared/DESIGN.md): the median within 5 %.

    PYTHONPATH=tui .venv/bin/python bench/hf_decoder_fidelity.py [--rounds 6] [--seq-len 128]
"""

from __future__ import annotations

import argparse
import platform
import sys

import torch

from timing_fidelity import alternate_rounds, reference_timers, report_agreement  # bench/timing_fidelity.py
from torchperf_tui.engine.measurements.bench_config import BenchConfig
from torchperf_tui.engine.measurements.flags import Flags, applied_flags
from torchperf_tui.engine.measurements.timing import run_timed_loop
from torchperf_tui.engine.measurements.train_step import StepRunner, StepSpec
from torchperf_tui.engine.hardware.device_choice import resolve_device
from torchperf_tui.engine.workloads.model_args import parse_model_args
from torchperf_tui.engine.workloads.models import build_model

TINY = "num_hidden_layers=2,hidden_size=256,intermediate_size=688,num_attention_heads=4,num_key_value_heads=4," \
       "vocab_size=4096,max_position_embeddings=1024"


def model_parser(description: str) -> argparse.ArgumentParser:
    """The benches' options of the tiny transformers decoder they time: --model and --model-args."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--model", default="hf:llama")
    parser.add_argument("--model-args", default=TINY)
    return parser


def main() -> int:
    parser = model_parser(__doc__.splitlines()[0])
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--iters", type=int, default=100)
    parser.add_argument("--min-run-time", type=float, default=2.0)
    args = parser.parse_args()

    device = resolve_device(args.device)
    cfg = BenchConfig(model=args.model, batch=args.batch, seq_len=args.seq_len, device=str(device),
                      model_args=parse_model_args(args.model_args))
    plan = cfg.prepare()
    model = build_model(cfg.model, model_args=cfg.model_args, dtype=plan.dtype).to(device)
    inputs = plan.inputs.make(device, plan.dtype)
    print(f"torch {torch.__version__} | python {platform.python_version()} | {platform.machine()}")
    print(f"{args.model} ({args.model_args}), {sum(p.numel() for p in model.parameters()) / 1e6:.1f} M parameters, "
          f"random weights, {plan.inputs.describe()}, device {device}, threads {args.threads}, {args.rounds} rounds "
          f"alternating (engine: {args.iters} iterations through its StepRunner; torch.utils.benchmark: "
          f"blocked_autorange(min_run_time={args.min_run_time}) of model(**inputs))")
    runner = StepRunner(model, StepSpec(), device)
    with applied_flags(Flags(num_threads=args.threads)), torch.inference_mode():
        timer, _ = reference_timers("model(*args, **kwargs)",
                                    {"model": model, "args": inputs.args, "kwargs": inputs.kwargs}, device,
                                    args.threads)
        run_timed_loop(lambda: runner(inputs), device=device, warmup=10, iters=10)  # shared warm-up, discarded
        engine_medians, timer_medians, engine_means, timer_means = alternate_rounds(
            lambda: runner(inputs), timer, device, args.rounds, args.iters, args.min_run_time)
    report_agreement(engine_medians, timer_medians, engine_means, timer_means, target=0.05)
    return 0


if __name__ == "__main__":
    sys.exit(main())
