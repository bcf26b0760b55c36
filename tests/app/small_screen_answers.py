"""Recorded answers for the views at 80x24 (tests/app/test_screen_80x24.py): a run disturbed by a few slow
iterations, its place on the roofline, a throughput search, a generation and a sweep, each as long in words as a
real one, so a test sees whether the screen shows it whole. Built from the request the app made (its model, input
and flags) with fixed figures; the measurement process answers nothing of them itself."""

from __future__ import annotations

from typing import Any

from tests.app.recorded_answers import TimedRuns
from tests.fakes.fake_measurement import Recorded

SLOW = {5: 300.0, 17: 512.0, 40: 704.0}  # the iterations a busy host stalled, by index, in ms


class DisturbedRuns(TimedRuns):
    """TimedRuns with three iterations stalled for hundreds of ms (the bulk about 20 ms), on a busy host."""

    def samples(self) -> list[float]:
        samples = super().samples()
        for index, ms in SLOW.items():
            samples[index] = ms
        return samples

    def __call__(self, params: dict) -> Recorded:
        from torchperf_tui.engine.hardware.host_noise import HostNoise

        recorded = super().__call__(params)
        recorded.result.host_noise = HostNoise(cores=2, load_start=6.0, load_end=7.0, window_s=30.0,
                                               other_busy_cores=1.5, slow_share=0.05, samples=60)
        return recorded


def recorded_roofline(params: dict) -> Any:
    """A run's place on the roofline beside a datasheet peak and a measured ceiling, with an intensity and a side:
    the longest the pane's line gets."""
    from torchperf_tui.engine.analysis.roofline import RooflineResult

    result = params["result"]
    return RooflineResult(model=result.model, device=result.device, dtype=result.dtype,
                          input_shape=tuple(result.input_shape), flops=10**9, bytes_moved=10**6,
                          bytes_method="unfused estimate", latency_ms=result.stats.p50_ms, latency_source="median",
                          achieved_tflops=0.0472, achieved_bandwidth_gbs=1.0, arithmetic_intensity=1000.0,
                          peak_tflops=1.5, peak_bandwidth_gbs=100.0, mfu_pct=3.15, bandwidth_pct=1.0,
                          ridge_flops_per_byte=15.0, side="compute", attainable_tflops=1.5, roofline_pct=3.15,
                          peaks_source="datasheet", measured_tflops=0.42, measured_mfu_pct=11.24,
                          peak_from="datasheet", above_ceiling={}, exceeds_ceiling=False)


def recorded_throughput(params: dict) -> Recorded:
    """A batch search of nine tries (batch 1 to 256, the last does not fit) and the measurement at the best."""
    from torchperf_tui.engine.measurements.batch_search import BatchTry, StopRule
    from torchperf_tui.engine.measurements.throughput import ThroughputResult
    from torchperf_tui.engine.hardware.nvml import NA

    cfg = params["cfg"]
    tries = [BatchTry(batch=2**i, fits=True, phase="grow", latency_ms=4.0 + 2**i * 0.9,
                      samples_per_s=2**i * 1000 / (4.0 + 2**i * 0.9), iters=3, seconds=0.2 * (i + 1))
             for i in range(8)]
    tries.append(BatchTry(batch=256, fits=False, phase="grow", reason="over the CPU memory cap: needs about 9 GiB",
                          seconds=0.1, failed_on=StopRule.MEMORY_CAP))
    best = tries[7]
    measurement = BatchTry(batch=best.batch, fits=True, phase="measure", latency_ms=best.latency_ms,
                           samples_per_s=best.samples_per_s, iters=20, seconds=3.0)
    shape = tuple(cfg.input_shape[1:]) if cfg.input_shape else (3, 32, 32)
    result = ThroughputResult(model=cfg.model, device="cpu", sample_shape=shape, dtype=cfg.dtype,
                              channels_last=False, max_batch=128, max_batch_bound=4096, hit_bound=False,
                              tries=tries, measurement=measurement, samples_per_s=measurement.samples_per_s,
                              latency_ms=measurement.latency_ms, memory_cap_bytes=8 * 1024**3,
                              allocator_before_bytes=NA("no CUDA"), allocator_after_bytes=NA("no CUDA"),
                              cancelled=False, duration_s=12.5, best_batch=128,
                              best_try_samples_per_s=best.samples_per_s, stop_rule=StopRule.MEMORY_CAP,
                              stop_reason="stopped growing at batch 256: over the CPU memory cap",
                              limit_found=True, first_failure=256, time_budget_s=120.0, to_oom=False)
    return Recorded(result, progress=tuple(("batch_try", t) for t in [*tries, measurement]))


def recorded_generation(params: dict) -> Recorded:
    """Five generations of 64 tokens after a 16-token prompt: the TTFT of each and 63 decode steps per run, the bytes
    a decode step reads and the copy ceiling kept for the device (the bandwidth's line as long as a real one)."""
    from torchperf_tui.engine.measurements.decode_bandwidth import CopyCeiling, DecodeBytes
    from torchperf_tui.engine.measurements.generation import GenerationResult, method_text

    cfg = params["cfg"]
    decode = [12.0 + 0.1 * (i % 7) for i in range(5 * 63)]
    result = GenerationResult(model=cfg.model, device="cpu", dtype=cfg.dtype, batch=1, prompt_len=16,
                              new_tokens=64, flags=cfg.flags, ttft_ms=[45.2, 44.0, 47.9, 45.0, 46.1],
                              decode_ms=decode, decode_steps=63, runs_asked=5, kv_cache_bytes=4718592,
                              kv_cache_positions=79, kv_cache_kind="DynamicCache", method=method_text(64, 16),
                              timer="perf_counter", cancelled=False, started_at=1_000_000.0, duration_s=9.0,
                              warmup_ttft_ms=120.0,
                              decode_bytes=DecodeBytes(weight_bytes=497_759_232, kv_first_bytes=1_015_376,
                                                       kv_mean_bytes=2_866_944.0, kv_last_bytes=4_718_512, steps=63,
                                                       first_positions=17, last_positions=79),
                              copy_ceiling=CopyCeiling(bytes_per_s=127.3e9, origin="copy 256.0 MiB, 16 threads",
                                                       key="recorded"))
    samples = (("prefill", 0, 5, result.ttft_ms), ("decode", len(decode) - 1, len(decode), decode))
    return Recorded(result, samples=samples)


def recorded_modes(params: dict) -> Any:
    """The timing modes of the request's model on the CPU: sync and pipelined measured (pipelined hides two thirds
    of sync), graph unavailable; the findings in the engine's words."""
    from torchperf_tui.core.stats import compute_stats
    from torchperf_tui.engine.measurements.timing_modes import ModeResult, ModesResult, findings

    cfg = params["cfg"]
    sync = [53.5 + 0.1 * (i % 5) for i in range(30)]
    pipelined = [17.5 + 0.1 * (i % 5) for i in range(30)]
    result = ModesResult(model=cfg.model, device="cpu", input_shape=tuple(cfg.input_shape or (1, 3, 32, 32)),
                         dtype=cfg.dtype, step="infer", flags=cfg.flags,
                         modes=[ModeResult("sync", sync, compute_stats(sync)),
                                ModeResult("pipelined", pipelined, compute_stats(pipelined)),
                                ModeResult("graph", unavailable="CUDA graphs are GPU-only")],
                         per_block=10, rounds=3, duration_s=4.0)
    result.findings = findings(result)
    return result
