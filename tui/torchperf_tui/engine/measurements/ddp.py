"""A DDP training step across ranks: its time, the same step's compute alone, the all-reduce of its gradients alone,
and from the three the communication the step could not hide behind its compute.

Each rank (engine/measurements/ranks.py: one process per rank, gloo on the CPU, NCCL on CUDA with one GPU per rank)
builds the model as every run does (BenchConfig.prepare, prepare_workload, the training step of StepRunner: forward,
loss, backward, optimizer step), on its own batch (the run's seed plus the rank), and wraps it in
torch.nn.parallel.DistributedDataParallel, which makes rank 0's weights everyone's. Then, in rounds, each part timed
alone between barriers on every rank at once:

- `compute`: the step on the model without DDP (no communication: one device's compute, under the same load);
- `ddp`: the step through DDP, whose all-reduce of each gradient bucket starts as the backward fills it;
- `allreduce`: the buckets DDP made, all-reduced back to back with nothing else running.

A part's time is the largest of the ranks' medians (a step ends with its slowest rank). The exposed communication
is ddp - compute, and the share of the communication hidden behind the compute 1 - exposed / allreduce, said within
0..1 (the result keeps the unclamped value, and says when it was clamped).

Loads without torch (the CLI parses the spec and the UI reads the result); torch is imported where a rank measures.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable

import psutil

from torchperf_tui.core.errors import TorchperfError
from torchperf_tui.core.formatting import format_bytes
from torchperf_tui.core import options
from torchperf_tui.engine.hardware.lazy_torch import torch
from torchperf_tui.engine.hardware.nvml import to_jsonable
from torchperf_tui.engine.measurements import ranks
from torchperf_tui.engine.measurements.bench_config import BenchConfig
from torchperf_tui.engine.measurements.collectives import CPU_MEMORY_SHARE, bus_factor
from torchperf_tui.engine.measurements.ranks import (SILENCE_S, START_S, Heartbeat, RankWatch, join_group, medians,
                                                     rank_devices, run_ranks, synchronizer, time_between_barriers)
from torchperf_tui.engine.measurements.train_step import StepRunner
from torchperf_tui.engine.workloads.workload import forward_errors, prepare_workload

PARTS = ("compute", "ddp", "allreduce")  # the order of a round
DEFAULT_ITERS = 20  # timed rounds: each is the three parts
DEFAULT_WARMUP = 5
# Untimed steps of each before the rounds: DDP starts with every gradient in one bucket, rebuilds its buckets in
# the order its first backward made the gradients as its second step starts, and its logging data says the rebuilt
# sizes once a third step has run (torch 2.x).
FIRST_STEPS = 3
FEWEST = ("DDP needs 2 ranks or more: across one there is no other rank to all-reduce the gradients with "
          "(bench MODEL --step train times one device's step)")
WORK = "the DDP steps"
# Where a rank is, after 'rank 1 failed ...', by what it began.
PLACES = {"build": "while building the model", "first": "during the first steps (DDP makes its buckets)",
          "warmup": "during the warm-up rounds", "timed": "during the timed rounds"}


def world_size(value: int | str) -> int:
    """The ranks of a DDP step: 2 or more, and at most ranks.WORLD_PER_CPU per logical CPU of this process."""
    return ranks.world_size(value, FEWEST)


def bucket_mb(value: float | str) -> float:
    """--bucket-mb: DDP's bucket_cap_mb, a finite number of MiB above 0."""
    return options.finite_float("--bucket-mb", value, low=0.0, low_inclusive=False)


@dataclass(frozen=True)
class DdpSpec:
    """What to run: `run`, the training step of one rank as every run describes it (the model, its input per rank,
    dtype, optimizer, mixed precision, seed; `warmup` and `iters` are rounds here), across `world` ranks (None: every
    GPU on CUDA, ranks.DEFAULT_CPU_WORLD on the CPU) on `device` ("auto": CUDA where there are two GPUs or more, else
    the CPU), with DDP's buckets of `bucket_mb` MiB (None: DDP's default)."""

    run: BenchConfig
    world: int | None = None
    device: str = "auto"
    bucket_mb: float | None = None

    @property
    def backend(self) -> str:
        return ranks.backend_of(self.device)

    def threads(self) -> int:
        """Intra-op threads per rank: the process's CPUs shared evenly among the ranks, one at least."""
        return max(1, options.cpu_count() // (self.world or ranks.DEFAULT_CPU_WORLD))


@dataclass
class PartTime:
    """One part of a round: its time (the largest of the ranks' medians) and each rank's median, in seconds."""

    time_s: float
    rank_medians_s: list[float]


@dataclass
class DdpResult:
    """The run: its spec as resolved (device and world chosen), the backend, what each rank ran on and with how many
    threads, the inputs each rank was fed, the loss, the parameters and bytes of gradient, the buckets DDP made
    (`buckets_from_ddp` False: DDP did not say them, and the all-reduce alone was one of every gradient) under its
    cap, each part's time, whether it was cancelled, the notes and the time taken."""

    spec: DdpSpec
    backend: str
    devices: list[str]
    threads: int
    inputs: str = ""
    loss: str | None = None
    parameters: int = 0
    gradient_bytes: int = 0
    gradient_dtype: str = ""
    buckets: list[int] = field(default_factory=list)
    buckets_from_ddp: bool = True
    bucket_cap_bytes: int | None = None
    parts: dict[str, PartTime] = field(default_factory=dict)
    cancelled: bool = False
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)
    torch_version: str = ""

    def time_of(self, part: str) -> float | None:
        got = self.parts.get(part)
        return got.time_s if got is not None else None

    @property
    def exposed_s(self) -> float | None:
        """The communication the DDP step did not hide: its time over the compute alone's."""
        step, compute = self.time_of("ddp"), self.time_of("compute")
        return step - compute if step is not None and compute is not None else None

    @property
    def hidden_unclamped(self) -> float | None:
        """1 - exposed / all-reduce alone, as measured (below 0 or above 1 on a noisy box, or where DDP costs more
        than its all-reduce)."""
        exposed, alone = self.exposed_s, self.time_of("allreduce")
        return 1 - exposed / alone if exposed is not None and alone else None

    @property
    def hidden(self) -> float | None:
        """The share of the all-reduce alone hidden behind the compute, within 0..1."""
        raw = self.hidden_unclamped
        return min(1.0, max(0.0, raw)) if raw is not None else None

    @property
    def algbw_gbs(self) -> float | None:
        """The all-reduce alone's gradient bytes over its time, in GB/s."""
        alone = self.time_of("allreduce")
        return self.gradient_bytes / alone / 1e9 if alone else None

    @property
    def busbw_gbs(self) -> float | None:
        """algbw x 2(n-1)/n: nccl-tests' bus bandwidth of an all-reduce (engine/measurements/collectives.py)."""
        algbw = self.algbw_gbs
        return algbw * bus_factor("all_reduce", self.spec.world) if algbw is not None else None

    def to_dict(self) -> dict[str, Any]:
        data = to_jsonable(self)
        data["spec"] = {"world": self.spec.world, "device": self.spec.device, "bucket_mb": self.spec.bucket_mb,
                        **self.spec.run.to_record()}
        data.update({f"{part}_s": self.time_of(part) for part in PARTS})
        data.update(exposed_s=self.exposed_s, hidden=self.hidden, hidden_unclamped=self.hidden_unclamped,
                    algbw_gbs=self.algbw_gbs, busbw_gbs=self.busbw_gbs)
        return data


# -- choosing the device and the world, in the measurement process ----------------------------------------------

def resolve_ddp(spec: DdpSpec, notes: list[str] | None = None) -> tuple[DdpSpec, Any]:
    """(`spec` with its device and world chosen and checked, the run's plan on rank 0's device): a world the box
    cannot run, a model or input the run refuses (BenchConfig.prepare), and on the CPU the ranks' inputs past the
    memory are each one line (TorchperfError), before any rank starts. `notes`: what was chosen for the user."""
    notes = notes if notes is not None else []
    if spec.run.step != "train":
        raise TorchperfError(f"a DDP step is a training step, not {spec.run.step!r}")
    device, world = ranks.choose_world(spec.device, spec.world, FEWEST, WORK, notes)
    resolved = replace(spec, device=device, world=world, run=replace(spec.run, device=device))
    plan = replace(resolved.run, device="cuda:0" if device == "cuda" else "cpu").prepare()
    if device == "cpu":
        _check_inputs_fit(plan.inputs, world)
    return resolved, plan


def _check_inputs_fit(inputs: Any, world: int) -> None:
    """The ranks' inputs (each its own batch, drawn in float32 first) against half of the memory available: a batch
    past it is one line now, not a rank killed by the kernel. What the steps keep besides (activations, gradients,
    optimizer state) is not counted: a rank that runs out of it is named as it dies."""
    if inputs.factory is not None:  # its example_inputs make them: their size is known once made, in the rank
        return
    each = 0
    for tensor, shape in inputs.shapes():
        count = 1
        for size in shape:
            count *= size
        each += count * (8 if tensor.integer else 4)
    available = psutil.virtual_memory().available
    if each * world > available * CPU_MEMORY_SHARE:
        raise TorchperfError(f"--batch {inputs.batch} across {world} ranks: their inputs alone need about "
                             f"{format_bytes(each * world)} (each rank its own batch), more than half of the "
                             f"{format_bytes(available)} available: lower --batch or --world")


# -- one rank's process ---------------------------------------------------------------------------------------

def ddp_rank(rank: int, spec: DdpSpec, store: str, events: Any, timeout_s: float) -> None:
    """One rank: join the group, build the model and its input (seed + rank), wrap it in DDP, run FIRST_STEPS
    untimed steps of each (DDP makes its buckets), tell the gradients and buckets (rank 0), then the warm-up and timed
    rounds of the three parts; its median per part goes to `events`, a sign of life about once a second."""
    import torch.distributed as dist  # torch itself: this is a rank's own process, which measures
    from torch.nn.parallel import DistributedDataParallel  # torch's DDP: likewise, only in the rank

    torch.set_num_threads(spec.threads())  # the ranks share the host's cores
    device = join_group(rank, spec.device, spec.world, store, timeout_s, events)
    events.put(("begin", rank, "build"))
    run = replace(spec.run, device=str(device), seed=spec.run.seed + rank)
    plan = run.prepare()
    work = prepare_workload(run.model, plan.inputs, plan.device, plan.dtype, run.channels_last, seed=run.seed,
                            model_args=run.model_args, quant=run.quant, attn=run.attn)
    alone = StepRunner(work.model, plan.step, plan.device, seed=run.seed)
    wrapped = DistributedDataParallel(work.model, device_ids=[device.index] if device.type == "cuda" else None,
                                      bucket_cap_mb=spec.bucket_mb)
    together = StepRunner(wrapped, plan.step, plan.device, seed=run.seed)
    x, sync, beat = work.x, synchronizer(device), Heartbeat(events, rank)
    with forward_errors(run.model, plan.shape, plan.dtype, plan.device):
        events.put(("begin", rank, "first"))
        for done in range(1, FIRST_STEPS + 1):
            alone(x)
            together(x)
            beat("first", done, FIRST_STEPS)
        sync()
        buckets, from_ddp, grads, cap = gradient_buckets(wrapped)
        buffers = [torch.zeros(size // grads.element_size(), dtype=grads.dtype, device=device) for size in buckets]
        if rank == 0:
            events.put(("facts", rank, {"inputs": plan.inputs.describe(), "loss": together.loss_kind,
                                        "parameters": sum(p.numel() for p in work.model.parameters()),
                                        "gradient_bytes": sum(buckets), "gradient_dtype": str(grads.dtype),
                                        "buckets": buckets, "buckets_from_ddp": from_ddp,
                                        "bucket_cap_bytes": cap}))
        calls = {"compute": lambda: alone(x), "ddp": lambda: together(x),
                 "allreduce": lambda: all_reduce_buckets(dist, buffers)}
        for phase, rounds in (("warmup", run.warmup), ("timed", run.iters)):
            events.put(("begin", rank, phase))
            beat.said()
            times = time_between_barriers(dist, calls, rounds, sync,
                                          lambda done, phase=phase, rounds=rounds: beat(phase, done, rounds))
    for part, median in medians(times).items():
        events.put(("median", rank, part, median))
    dist.barrier()
    dist.destroy_process_group()
    events.put(("done", rank))


def gradient_buckets(wrapped: Any) -> tuple[list[int], bool, Any, int | None]:
    """(the bytes of each gradient bucket DDP all-reduces, whether DDP said them, an empty tensor of the gradients'
    dtype, DDP's cap on a bucket in bytes or None). DDP says its buckets as it rebuilt them (else as it made them
    at first); where it does not (its logging data is torch's own, and may change), or they do not add up to
    every gradient, one bucket of every gradient."""
    params = [p for p in wrapped.module.parameters() if p.requires_grad]
    grads = torch.empty(0, dtype=params[0].dtype)
    total = sum(p.numel() * p.element_size() for p in params)
    try:
        data = wrapped._get_ddp_logging_data()  # torch's own: guarded, with a fallback
        said = str(data.get("rebuilt_bucket_sizes") or data.get("bucket_sizes") or "")
        sizes = [int(size) for size in said.split(",") if size.strip()]
        cap = data.get("bucket_cap_bytes")
        cap = int(cap) if cap is not None else None
    except (AttributeError, RuntimeError, TypeError, ValueError):
        sizes, cap = [], None
    if not sizes or sum(sizes) != total:
        return [total], False, grads, cap
    return sizes, True, grads, cap


def all_reduce_buckets(dist: Any, buffers: list) -> None:
    """Each bucket all-reduced as DDP issues them (asynchronous, in order), then waited for."""
    for work in [dist.all_reduce(buffer, async_op=True) for buffer in buffers]:
        work.wait()


# -- the parent: start the ranks, hear them, stop them ----------------------------------------------------------

class DdpWatch(RankWatch):
    """The parent's side of a DDP run: where a rank is in words, a part's time once every rank has sent its median,
    and rank 0's facts (the gradients, the buckets, the loss)."""

    def __init__(self, world: int, on_progress, now: float) -> None:
        super().__init__(world, on_progress, now)
        self.parts: dict[str, PartTime] = {}
        self.facts: dict[str, Any] = {}

    def place(self, where: tuple) -> str:
        return PLACES[where[0]]

    def complete(self, key: tuple, medians: list[float]) -> None:
        self.parts[key[0]] = PartTime(max(medians), medians)

    def heard_other(self, message: tuple) -> None:
        if message[0] == "facts":
            self.facts = dict(message[2])


def run_ddp(spec: DdpSpec, *, on_progress: Callable[..., None] | None = None,
            on_note: Callable[[str], None] | None = None, should_cancel: Callable[[], bool] | None = None,
            body: Callable[..., None] = ddp_rank, start_s: float = START_S,
            silence_s: float = SILENCE_S) -> DdpResult:
    """Run `spec`'s DDP step across its ranks and return each part's time. `on_progress(phase, done, total)` about
    once a second from rank 0 ("first" steps, "warmup" or "timed" rounds); `on_note(line)` for what was chosen. `body`: what each
    rank runs (ddp_rank; tests plant others). A rank that fails, dies or falls silent stops them all and raises
    ranks.RankFailed, one line naming it; a cancel stops them and returns what was complete."""
    notes: list[str] = []
    spec, _ = resolve_ddp(spec, notes)
    for note in notes:
        (on_note or (lambda line: None))(note)
    started = time.monotonic()
    watch = DdpWatch(spec.world, on_progress, started)
    cancelled = run_ranks(spec, spec.world, body, watch, should_cancel, start_s, silence_s, name="ddp")
    facts = watch.facts
    return DdpResult(spec=spec, backend=spec.backend, devices=rank_devices(spec.device, spec.world),
                     threads=spec.threads(), inputs=facts.get("inputs", ""), loss=facts.get("loss"),
                     parameters=facts.get("parameters", 0), gradient_bytes=facts.get("gradient_bytes", 0),
                     gradient_dtype=str(facts.get("gradient_dtype", "")).removeprefix("torch."),
                     buckets=list(facts.get("buckets", [])), buckets_from_ddp=facts.get("buckets_from_ddp", True),
                     bucket_cap_bytes=facts.get("bucket_cap_bytes"),
                     parts=watch.parts, cancelled=cancelled, seconds=time.monotonic() - started, notes=notes,
                     torch_version=str(torch.__version__))
