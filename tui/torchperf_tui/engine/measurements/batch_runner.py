"""Runs one built model at a given batch, for the batch search (engine/measurements/batch_search.py): the default
`try_batch` of `find_max_batch` (engine/measurements/throughput.py).

On the CPU nothing raises before the box swaps, so a memory cap stands in for the device's capacity: a try's
need is estimated before it runs, from the peak RSS growth of the largest batch that fitted so far scaled by
batch (or, before anything has run, from the activation bytes of the complexity analysis), and a try whose
estimate is over the cap counts as out of memory without being run; a try whose measured peak went over the
cap counts as not fitting too.
"""

from __future__ import annotations

import psutil

from torchperf_tui.engine.measurements.batch_search import TRY_ITERS, TRY_WARMUP, MemoryCapExceeded, ShouldCancel, TryOutcome
from torchperf_tui.engine.workloads.input_spec import InputSpec
from torchperf_tui.engine.hardware.lazy_torch import torch
from torchperf_tui.engine.hardware.condition_sampler import ConditionSampler
from torchperf_tui.engine.hardware.host_noise import HostProbe
from torchperf_tui.engine.measurements.timing import run_timed_loop
from torchperf_tui.core.formatting import format_bytes
from torchperf_tui.engine.measurements.train_step import StepRunner, StepSpec


# --------------------------------------------------------------------------------------------------------
# Running a real model


class _PeakRss:
    """Peak resident memory over a span: Linux lets a process reset its high-water mark (VmHWM) by
    writing 5 to /proc/self/clear_refs; elsewhere the RSS after the span stands in (an underestimate)."""

    def __init__(self) -> None:
        self._process = psutil.Process()
        self.exact = True

    def reset(self) -> int:
        """Start a span; returns the RSS now."""
        try:
            with open("/proc/self/clear_refs", "w") as fh:
                fh.write("5")
        except OSError:
            self.exact = False
        return int(self._process.memory_info().rss)

    def peak(self) -> int:
        if self.exact:
            try:
                with open("/proc/self/status") as fh:
                    for line in fh:
                        if line.startswith("VmHWM:"):
                            return int(line.split()[1]) * 1024
            except OSError:
                pass
            self.exact = False
        return int(self._process.memory_info().rss)


class ModelBatchRunner:
    """Runs one built model at a given batch: the default `try_batch` of `find_max_batch`.

    On the CPU it keeps the estimate of a try's need (see the module docstring) and refuses, with
    MemoryCapExceeded, a try whose estimate is over `memory_cap_bytes`, or that went over it when it ran.
    """

    def __init__(self, model: torch.nn.Module, inputs: InputSpec | tuple[int, ...], *, device: torch.device,
                 dtype: torch.dtype, channels_last: bool = False, memory_cap_bytes: int | None = None,
                 activation_bytes_per_sample: int | None = None,
                 should_cancel: ShouldCancel | None = None, step=None, seed: int = 0,
                 sampler: ConditionSampler | None = None) -> None:
        """`step`: a train_step.StepSpec (None: an inference pass), run by a StepRunner kept across tries (its
        optimizer state is allocated once, at the first try, as in a training loop). `sampler` reads the GPU's
        conditions over the timed iterations of a call made while `window` names one (the final measurement).
        `inputs`: what the model takes (its batch is set per try), or one float tensor's shape without the batch."""
        self.sampler = sampler
        self.window: str | None = None
        # The host over a call's timed iterations: a probe of its own per call (a try), or this one, read over every
        # call made while it is set (a sweep's length, over its blocks), which its owner sums up.
        self.host: HostProbe | None = None

        self.model = model
        self.run_step = StepRunner(model, step or StepSpec(), device, seed=seed)
        self.inputs = inputs if isinstance(inputs, InputSpec) else InputSpec((1, *inputs))
        self.device = device
        self.dtype = dtype
        self.channels_last = channels_last
        self.memory_cap_bytes = memory_cap_bytes
        self.activation_bytes_per_sample = activation_bytes_per_sample
        self.should_cancel = should_cancel
        self._fits: dict[int, int] = {}  # batch -> peak growth (bytes) of the tries that ran
        self._rss = _PeakRss()
        # Growth is measured from the RSS when the runner was made (just after a release), not from the
        # RSS before each try: freed pages glibc keeps from an earlier try would be reused unseen.
        self._baseline_rss = int(psutil.Process().memory_info().rss)

    def estimate_bytes(self, batch: int) -> int | None:
        """A try's expected peak memory growth.

        From the two largest tries that ran: a straight line (fixed overhead + bytes per sample) through
        their measured peaks, never below the larger peak; from one: its peak scaled by batch (its fixed
        overhead scales too, which errs on the safe side); before any: activation bytes x batch.
        """
        fits: list[tuple[int, int]] = []
        for b, grown in sorted(self._fits.items()):
            # Peaks are noisy (glibc reuses freed pages unseen): a larger batch never needs less.
            envelope = max(grown, fits[-1][1] if fits else 0)
            if envelope > 0:
                fits.append((b, envelope))
        if len(fits) >= 2:
            (b1, p1), (b2, p2) = fits[-2], fits[-1]
            per_sample = (p2 - p1) / (b2 - b1)
            if per_sample > 0:
                return int(max(p2 + per_sample * (batch - b2), p2 if batch >= b2 else 0))
        if fits:
            b2, p2 = fits[-1]
            return int(p2 * batch / b2)
        if self.activation_bytes_per_sample:
            return int(self.activation_bytes_per_sample * batch)
        return None

    def __call__(self, batch: int, warmup: int = TRY_WARMUP, iters: int = TRY_ITERS) -> TryOutcome:
        on_cpu = self.device.type == "cpu"
        cap = self.memory_cap_bytes if on_cpu else None
        estimated = self.estimate_bytes(batch) if on_cpu else None
        # A batch that already ran under the cap runs again (the final measurement): its own measured peak
        # says more than an estimate drawn through other batches.
        ran_under_cap = cap is not None and self._fits.get(batch, cap + 1) <= cap
        if cap is not None and estimated is not None and estimated > cap and not ran_under_cap:
            exc = MemoryCapExceeded(f"over the CPU memory cap: needs about {format_bytes(estimated)}, "
                                    f"cap {format_bytes(self.memory_cap_bytes)}")
            exc.estimated_bytes = estimated  # type: ignore[attr-defined]
            raise exc
        if on_cpu:
            # Memory freed since the baseline was taken would hide part of this try's growth.
            self._baseline_rss = min(self._baseline_rss, self._rss.reset())
        else:
            torch.cuda.synchronize(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
            allocated_before = torch.cuda.memory_allocated(self.device)
        x = self.inputs.at_batch(batch).make(self.device, self.dtype, self.channels_last)
        run_step = self.run_step
        sampler = self.sampler if self.window is not None else None  # read over the final measurement only
        window = self.window

        host = self.host if self.host is not None else HostProbe(during="its timed iterations")

        def before(phase: str, index: int) -> None:  # outside the timer
            if phase == "timed":
                if index == 0:
                    host.begin()
                if sampler is not None:
                    sampler.before_timed(window, index)

        times = run_timed_loop(lambda: run_step(x), device=self.device, warmup=warmup, iters=iters,
                               should_cancel=self.should_cancel, before_iteration=before)
        host.end()
        if sampler is not None:
            sampler.close(window, keep=not times.cancelled)
        x = None  # the input goes before the peak is read and before the next, larger try
        if on_cpu:
            peak = max(0, self._rss.peak() - self._baseline_rss)
            self._fits[batch] = peak  # measured: the next estimates draw on it, over the cap or not
            if cap is not None and peak > cap:
                # It ran, but a batch that needs more than the cap does not fit under it.
                exc = MemoryCapExceeded(f"went over the CPU memory cap: used about {format_bytes(peak)}, "
                                        f"cap {format_bytes(cap)}")
                exc.estimated_bytes = estimated  # type: ignore[attr-defined]
                exc.peak_bytes = peak  # type: ignore[attr-defined]
                raise exc
        else:
            peak = max(0, torch.cuda.max_memory_allocated(self.device) - allocated_before)
        samples = times.samples_ms or ([times.first_iter_ms] if times.first_iter_ms is not None else [])
        noise = host.summary(samples) if self.host is None else None  # a shared probe is summed up by its owner
        return TryOutcome(samples, peak_bytes=peak, estimated_bytes=estimated, host_noise=noise)
