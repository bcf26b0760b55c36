"""Generation fidelity: the engine's time to first token and per-token median (engine/measurements/generation.py, as
`bench --generate` runs it: the model built, flags applied, every step streamed to a callback) against a hand-written
greedy loop with past_key_values, in one process, alternating round by round (the order flips each round),
after one uncounted round of each.

The reference is the textbook loop: the prompt's pass with use_cache=True and the last position's logits alone
(logits_to_keep=1, as model.generate and the engine ask), the argmax; then one pass per token fed the argmax, the
cache the pass before returned and the grown attention mask; perf_counter around each pass and its argmax, under
torch.inference_mode on the same threads, one warm-up generation first. Budget (../shared/DESIGN.md): TTFT and
per-token medians within 10 %.

    PYTHONPATH=tui .venv/bin/python bench/generation_fidelity.py [--rounds 12] [--runs 3] [--threads 1] [--prompt-len 64]
"""

from __future__ import annotations

import inspect
import os
import platform
import statistics
import time

import torch

from torchperf_tui.engine.measurements.bench_config import BenchConfig
from torchperf_tui.engine.measurements.flags import Flags, applied_flags
from torchperf_tui.engine.measurements.generation import run_generation
from torchperf_tui.engine.workloads.model_args import parse_model_args
from torchperf_tui.engine.workloads.models import build_model

from hf_decoder_fidelity import model_parser  # bench/hf_decoder_fidelity.py: the tiny decoder's options

BUDGET = 0.10


def hand_written(model, ids, mask, new_tokens: int, runs: int) -> tuple[list[float], list[float]]:
    """(TTFT per run, every decode step's ms) of a plain greedy loop with the model's cache; one warm-up first."""
    params = inspect.signature(model.forward).parameters
    # transformers 5.24 takes the cache as `cache` (past_key_values is the older name of the same argument).
    past = "cache" if "cache" in params else "past_key_values"
    keep = {"logits_to_keep": 1} if "logits_to_keep" in params else {}
    full = torch.ones((ids.shape[0], ids.shape[1] + new_tokens), dtype=mask.dtype)
    ttft, decode = [], []
    for run in range(runs + 1):
        t0 = time.perf_counter()
        out = model(input_ids=ids, attention_mask=mask, use_cache=True, **keep)
        token = out.logits[:, -1, :].argmax(dim=-1, keepdim=True)
        ms = (time.perf_counter() - t0) * 1e3
        cache = out.cache if hasattr(out, "cache") else out.past_key_values
        steps = []
        for step in range(1, new_tokens):
            t0 = time.perf_counter()
            out = model(input_ids=token, attention_mask=full[:, :ids.shape[1] + step], use_cache=True,
                        **{past: cache})
            token = out.logits[:, -1, :].argmax(dim=-1, keepdim=True)
            steps.append((time.perf_counter() - t0) * 1e3)
            cache = out.cache if hasattr(out, "cache") else out.past_key_values
        if run > 0:  # run 0: the warm-up generation
            ttft.append(ms)
            decode.extend(steps)
    return ttft, decode


def main() -> int:
    parser = model_parser(__doc__.splitlines()[0])
    parser.add_argument("--prompt-len", type=int, default=64)
    parser.add_argument("--new-tokens", type=int, default=32)
    parser.add_argument("--runs", type=int, default=3)
    # One intra-op thread by default, as torch.utils.benchmark's Timer: on this project's shared 2-core box two threads
    # make every pass hostage to the other processes' load (their barrier waits swung a round's per-token median
    # 1.4-10 ms under a load of 3-4), which says nothing about either loop.
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=12)
    args = parser.parse_args()

    flags = Flags(num_threads=args.threads)
    cfg = BenchConfig(model=args.model, seq_len=args.prompt_len, device="cpu", flags=flags,
                      model_args=parse_model_args(args.model_args), time_budget_s=None)
    plan = cfg.prepare()
    model = build_model(cfg.model, model_args=cfg.model_args, dtype=plan.dtype)
    prompt = plan.inputs.make("cpu", plan.dtype)
    ids, mask = prompt.kwargs["input_ids"], prompt.kwargs["attention_mask"]
    load_before = os.getloadavg()
    print(f"torch {torch.__version__} | python {platform.python_version()} | {platform.machine()} | "
          f"{os.cpu_count()} logical CPUs | load average before {load_before[0]:.2f} {load_before[1]:.2f} "
          f"{load_before[2]:.2f}")
    print(f"{args.model} [{args.model_args}] ({sum(p.numel() for p in model.parameters()) / 1e6:.1f} M parameters, "
          f"random weights), {args.new_tokens} new tokens after a {args.prompt_len}-token prompt, threads "
          f"{args.threads}, {args.rounds} rounds alternating, each side {args.runs} timed generations after a "
          "warm-up one")
    # Both sides once, not counted: the process's one-off costs (lazy imports, the allocator, oneDNN's primitives for
    # each new shape) land in whichever side runs first, before any warm-up generation of its own.
    run_generation(cfg, args.new_tokens, runs=1)
    with applied_flags(flags), torch.inference_mode():
        hand_written(model, ids, mask, args.new_tokens, 1)
    ratios_ttft, ratios_token = [], []
    print(f"{'round':>5} {'first':>9} {'engine TTFT':>12} {'hand TTFT':>10} {'ratio':>6}  "
          f"{'engine/token':>12} {'hand/token':>10} {'ratio':>6}")
    for r in range(args.rounds):
        order = ("engine", "hand") if r % 2 == 0 else ("hand", "engine")
        figures = {}
        for side in order:
            if side == "engine":
                result = run_generation(cfg, args.new_tokens, runs=args.runs)
                figures[side] = (result.ttft_stats.p50_ms, result.decode_stats.p50_ms)
            else:
                with applied_flags(flags), torch.inference_mode():
                    ttft, decode = hand_written(model, ids, mask, args.new_tokens, args.runs)
                figures[side] = (statistics.median(ttft), statistics.median(decode))
        (e_ttft, e_tok), (h_ttft, h_tok) = figures["engine"], figures["hand"]
        ratios_ttft.append(e_ttft / h_ttft)
        ratios_token.append(e_tok / h_tok)
        print(f"{r + 1:>5} {order[0]:>9} {e_ttft:>9.3f} ms {h_ttft:>7.3f} ms {ratios_ttft[-1]:>6.3f}  "
              f"{e_tok:>9.3f} ms {h_tok:>7.3f} ms {ratios_token[-1]:>6.3f}")
    load_after = os.getloadavg()
    ok = True
    for name, ratios in (("TTFT", ratios_ttft), ("per-token", ratios_token)):
        median = statistics.median(ratios)
        within = abs(median - 1) <= BUDGET
        ok &= within
        print(f"{name}: median ratio engine/hand-written {median:.3f} (rounds {min(ratios):.3f}-{max(ratios):.3f}): "
              f"{'within' if within else 'OUTSIDE'} the {BUDGET:.0%} budget")
    print(f"load average after {load_after[0]:.2f} {load_after[1]:.2f} {load_after[2]:.2f} (other helpers share "
          "this box's 2 cores)")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
