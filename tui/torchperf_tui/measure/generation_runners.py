"""The generation jobs of the measurement process (measure/jobs.py names them): "generate", a call of
engine/measurements/generation.py with the job's cancel flag and its per-token latencies streamed as Samples (phases
"warmup", "prefill", "decode"), and "generate_ab", two arms generating interleaved."""

from __future__ import annotations

from typing import Any

from torchperf_tui.engine.measurements.ab_arms import AA_REMEDY, refuse_same_arms
from torchperf_tui.measure.runners import JobContext, SampleStream, history_extra, say_setup_notes, send_every_s
from torchperf_tui.engine.measurements.generation import GENERATE_RUNS, run_generation
from torchperf_tui.engine.measurements.generation_ab import run_generation_ab


def generate_job(params: dict, ctx: JobContext) -> tuple[Any, dict]:
    """params: cfg (BenchConfig: the prompt is its input), new_tokens, runs (optional). Progress "note": the setup's
    (say_setup_notes). Streams Samples. -> (GenerationResult, {"fingerprint"})."""
    say_setup_notes(params["cfg"], ctx)
    stream = SampleStream(ctx, every_s=send_every_s(params["cfg"]))
    try:
        result = run_generation(params["cfg"], params["new_tokens"], runs=params.get("runs", GENERATE_RUNS),
                                on_sample=stream.on_sample, should_cancel=ctx.cancelled)
    finally:
        stream.close()
    return result, history_extra(result)


def generate_ab_job(params: dict, ctx: JobContext) -> tuple[Any, dict]:
    """params: base (BenchConfig), a, b (ArmSpecs), new_tokens, blocks, seed, time_budget_s, aa (identical arms
    allowed). Progress "block": (arm, index, total). -> (GenerationABResult, {})."""
    if not params.get("aa"):  # as they resolve here (the thread count left empty is this process's)
        refuse_same_arms(params["base"], params["a"], params["b"], AA_REMEDY)
    return run_generation_ab(params["base"], params["a"], params["b"], params["new_tokens"], blocks=params["blocks"],
                             seed=params.get("seed", 0), should_cancel=ctx.cancelled,
                             time_budget_s=params.get("time_budget_s"),
                             on_block=lambda arm, i, n: ctx.progress("block", (arm, i, n))), {}
