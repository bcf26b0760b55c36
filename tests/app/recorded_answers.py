"""Recorded answers of the measurement process for the app tests (tests/fakes/fake_measurement.py): what a timing
run, an A/B comparison and a kernel profile send back, built from the request the app made (its model, input and
flags) with fixed samples. A test presses the keys a user presses and the screen is the same on every box; the
results on the fake H100 are ones no job on a CPU box could produce.

Each answer streams what the real job streams before its result (measure/runners.py): a timing run its Samples
(first, warm-up, timed), an A/B its "block" Progress events in the order the blocks ran.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from tests.fakes.fake_measurement import HELD, Failed, Recorded

# A finished run's roofline job, answered as a replaced job is (cancelled): the views that show the run alone, the
# same on every box (the roofline's CPU peaks are this machine's).
NOT_PLACED = Failed("the roofline is not part of this view", cancelled=True)


class TimedRuns:
    """Answers "time" jobs, the n-th (from 0) with 60 timed samples of about 20 - 2n ms (seeded), after a first
    iteration of 85 ms and a warm-up of 10: its Samples as the real job streams them, then its TimingResult at the
    request's model, input, dtype and flags on `device`, with the GPU's `conditions` over it and its `input_copy`
    (engine/hardware/input_copy.InputCopy) when given."""

    def __init__(self, device: str = "cpu", conditions: Any = None, seed: int = 11, input_copy: Any = None) -> None:
        import numpy as np

        self.device, self.conditions, self.input_copy = device, conditions, input_copy
        self.rng = np.random.default_rng(seed)
        self.answered = 0

    def samples(self) -> list[float]:
        samples = list(20.0 - 2.0 * self.answered + self.rng.gamma(2.0, 0.6, 60))
        self.answered += 1
        return samples

    def __call__(self, params: dict) -> Recorded:
        from torchperf_tui.core.stats import compute_stats
        from torchperf_tui.engine.measurements.timing import TimingResult

        cfg = params["cfg"]
        samples = self.samples()
        warmup = samples[:10]
        shape = tuple(cfg.input_shape) if cfg.input_shape else (1, 3, 32, 32)
        result = TimingResult(model=cfg.model, device=self.device, input_shape=shape, dtype=cfg.dtype,
                              channels_last=cfg.channels_last, flags=cfg.flags, first_iter_ms=85.0,
                              warmup_ms=warmup, samples_ms=samples, stats=compute_stats(samples, batch=shape[0]),
                              cancelled=False, started_at=1_000_000.0, duration_s=1.4,
                              timer="cuda-events" if self.device.startswith("cuda") else "perf_counter",
                              shapes=cfg.shapes, sample_first_seen=[False] * len(samples), step=cfg.step,
                              iters_asked=len(samples), conditions=self.conditions,
                              config=dataclasses.replace(cfg, device=self.device, input_shape=shape, batch=None))
        result.input_copy = self.input_copy
        return Recorded(result, samples=(("first", 0, 1, [85.0]), ("warmup", 9, 10, warmup),
                                         ("timed", 59, 60, samples)))


def run_in_flight(warmup: list[float], timed: list[float], total: int) -> Recorded:
    """A "time" job caught in flight: its first iteration, warm-up and first timed batch, then nothing until it is
    cancelled (the fake holds it)."""
    return Recorded(HELD, samples=(("first", 0, 1, [warmup[0]]), ("warmup", len(warmup) - 1, len(warmup), warmup),
                                   ("timed", len(timed) - 1, total, timed)))


def recorded_ab(device: str = "cuda:0", conditions: tuple = (None, None), notes: tuple = ()):
    """Answers an "ab" job: 10 interleaved blocks per arm with fixed samples, B about 15 % faster than A; each
    arm's GPU `conditions` and the comparison's `notes` when given."""

    def answer(params: dict) -> Recorded:
        import numpy as np

        from torchperf_tui.engine.measurements.abtest import ABResult, ArmResult, block_order, block_verdict

        rng = np.random.default_rng(7)
        a_blocks = [list(6.0 + 0.2 * rng.standard_normal(10)) for _ in range(10)]
        b_blocks = [list(5.1 + 0.2 * rng.standard_normal(10)) for _ in range(10)]
        base, kind = params["base"], said_on(device)
        arms = []
        for flags, blocks, arm_conditions in ((params["a"].flags, a_blocks, conditions[0]),
                                              (params["b"].flags, b_blocks, conditions[1])):
            arm = ArmResult(spec=flags.describe(kind), flags=flags, dtype=base.dtype,
                            channels_last=base.channels_last, blocks=blocks, conditions=arm_conditions)
            arm.summarise()
            arms.append(arm)
        order = block_order(len(a_blocks), params.get("seed", 0))
        result = ABResult(model=base.model, device=device, input_shape=tuple(base.input_shape or (1, 3, 224, 224)),
                          a=arms[0], b=arms[1], order=order, verdict=block_verdict(a_blocks, b_blocks),
                          cancelled=False, duration_s=4.2, notes=list(notes))
        left = {"A": iter(a_blocks), "B": iter(b_blocks)}
        blocks = tuple(("block", (name, index, len(order), next(left[name]))) for index, name in enumerate(order))
        return Recorded(result, progress=blocks)

    return answer


def said_on(device: str) -> str:
    """The kind of device an app's arms are said on: the run's, as the measurement process resolves it (its flag sets
    come without text: measure/runners.py arms_said)."""
    return "cuda" if device.startswith("cuda") else "cpu"


def recorded_kernels(device: str = "cuda:0", attention: bool = False, arm_hosts: dict | None = None):
    """Answers a "kernels" job: four conv layers of a resnet50 on an H100 under A and B, three of them changed;
    with `attention`, two SDPA call sites after them as the H200 gave them, math kept at one (a fallback: flash
    allowed, dtype float32) and math to flash at the other. `arm_hosts`: the host over each arm's passes (HostNoise
    by "A", "B")."""

    def answer(params: dict):
        from torchperf_tui.engine.analysis.kernels import CUDA_NOTE, KernelComparison, LayerKernels
        from torchperf_tui.engine.analysis.kernel_time import KernelTime

        gemm = "void cudnn::cnn::implicit_convolve_sgemm<float, float, 1024, 5, 5, 3, 3, 3, 1, false, false, true>"
        wino = ("void cudnn::winograd_nonfused::winogradForwardData4x4<float, float>"
                "(cudnn::winograd_nonfused::Params)")
        fft = "sm80_xmma_fprop_implicit_gemm_tf32f32_tf32f32_f32_nhwckrsc_nchw_tilesize128x128x16_stage4_kernel"
        layers = [LayerKernels("conv1", [KernelTime(gemm, 88.0, 1)], [KernelTime(fft, 52.0, 1)]),
                  LayerKernels("layer1.0.conv1", [KernelTime(gemm, 41.0, 1)], [KernelTime(wino, 23.0, 1)]),
                  LayerKernels("layer1.0.conv2", [KernelTime(gemm, 40.0, 1)], [KernelTime(gemm, 40.5, 1)]),
                  LayerKernels("layer3.0.conv2", [KernelTime(gemm, 41.0, 1)], [KernelTime(wino, 23.0, 1)])]
        base, kind = params["base"], said_on(device)
        shape = tuple(base.input_shape or (1, 3, 224, 224))
        return KernelComparison(model=base.model, device=device, input_shape=shape,
                                a_spec=params["a"].flags.describe(kind), b_spec=params["b"].flags.describe(kind),
                                layers=layers, attention=sites() if attention else [],
                                kind="cuda-kernel", note=CUDA_NOTE, iters=3, arm_hosts=dict(arm_hosts or {}))

    def sites():
        from torchperf_tui.engine.analysis.attention_result import AttentionRun, AttentionSite

        def run(allowed, ran, us, passed_over=None):
            return AttentionRun(allowed=allowed, ran=ran, us_per_iter=us, calls_per_iter=1.0,
                                passed_over=passed_over or {})

        return [AttentionSite("model.layers.0.self_attn", "fwd", run("math", "math", 120.0),
                              run("flash+math", "math", 119.0, {"flash": "dtype float32"})),
                AttentionSite("model.layers.1.self_attn", "fwd", run("math", "math", 133.0),
                              run("flash", "flash", 12.0))]

    return answer


# algbw (GB/s) of each size in a recorded run of collectives, smallest first: busbw = algbw x the factor reads exactly
# in the table (a factor of 1.5 or 0.75 on these is a round number)
RECORDED_ALGBW = (2.0, 8.0, 20.0, 40.0, 100.0)


def recorded_collectives(world: int = 4, device: str = "cuda", peak_gbs: float | None = 450.0, held: bool = False,
                         ops: tuple = ()):
    """Answers a "collectives" job with its spec as the measurement process resolves it (`world` ranks on `device`),
    a point per collective and size at RECORDED_ALGBW, each streamed as the real job streams it (the progress of a
    size, then its point), against the link's `peak_gbs` (None: n/a, as on the CPU). `held`: only the collectives
    `ops` stream, then the job runs on until it is cancelled."""

    def answer(params: dict) -> Recorded:
        from torchperf_tui.engine.hardware.nvml import NA
        from torchperf_tui.engine.measurements.collectives import PEAK_NA_CPU, CollectivesResult, make_point

        spec = dataclasses.replace(params["spec"], world=world, device=device)
        points, progress = [], []
        for op in ops or spec.ops:
            for size, algbw in zip(spec.message_sizes(), RECORDED_ALGBW):
                point = make_point(op, size, [size / (algbw * 1e9)] * world, peak_gbs)
                points.append(point)
                progress += [("collective_progress", (op, size, spec.iters // 2, spec.iters)),
                             ("collective_point", point)]
        if held:
            return Recorded(HELD, progress=tuple(progress))
        devices = ([f"cuda:{i} (NVIDIA H100 80GB HBM3)" for i in range(world)] if device == "cuda"
                   else ["cpu"] * world)
        peak = (peak_gbs, "NVLink 18 links") if peak_gbs is not None else (NA(PEAK_NA_CPU), "")
        result = CollectivesResult(spec=spec, backend="nccl" if device == "cuda" else "gloo", devices=devices,
                                   peak_gbs=peak[0], peak_source=peak[1], points=points, seconds=6.4,
                                   torch_version="2.x (test)")
        return Recorded(result, progress=tuple(progress))

    return answer
