"""Collectives across processes: all-reduce, all-gather and reduce-scatter over message sizes, each size's time,
algorithm bandwidth (algbw) and bus bandwidth (busbw) as nccl-tests defines them, against the link's peak.

The ranks are started, joined, heard and stopped as engine/measurements/ranks.py does it for every run across
processes (gloo on the CPU, NCCL on CUDA with one GPU per rank; a rank that fails, dies or falls silent named in one
line). Each rank times every iteration between barriers and sends its median per size; the size's time is the
largest of the ranks' medians (a collective has ended when its slowest rank has).

Loads without torch (the CLI parses the spec and the UI reads the result); torch is imported where a rank measures.
"""

from __future__ import annotations

import dataclasses
import re
import time
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable

import psutil

from torchperf_tui.core.errors import TorchperfError, first_line
from torchperf_tui.core.formatting import format_bytes
from torchperf_tui.engine.hardware.lazy_torch import torch
from torchperf_tui.engine.hardware.device import TorchCudaBackend, nvml_index_for
from torchperf_tui.engine.hardware.nvml import NA, default_nvml, to_jsonable
from torchperf_tui.engine.hardware.topology import link_peak, probe_topology
from torchperf_tui.engine.measurements import ranks
from torchperf_tui.engine.measurements.ranks import (SILENCE_S, START_S, Heartbeat, RankWatch, join_group, medians,
                                                     rank_devices, run_ranks, synchronizer, time_between_barriers)

OPS = ("all_reduce", "all_gather", "reduce_scatter")
DTYPE = "float32"  # nccl-tests' default type
ELEMENT_BYTES = 4
# Message sizes: LO, 4 LO, 16 LO, ... and HI last (nccl-tests' -f step is 2; 4 gives the same curve in half the run).
SIZE_STEP = 4
DEFAULT_SIZES = "1K-64M"
# The largest message: nccl-tests' usual top (-e 8G); past it one buffer per rank outgrows most GPUs.
SIZE_MAX = 8 * 1024**3
SIZE_UNITS = {"": 1, "b": 1, "k": 1024, "kb": 1024, "kib": 1024, "m": 1024**2, "mb": 1024**2, "mib": 1024**2,
              "g": 1024**3, "gb": 1024**3, "gib": 1024**3}
DEFAULT_ITERS = 20
DEFAULT_WARMUP = 5
# Memory the buffers of every rank may take on the CPU: half of what the box has available (the rest is the ranks'
# interpreters, torch and whatever else runs); on a GPU, the GPU's memory less a tenth for NCCL and the context.
CPU_MEMORY_SHARE = 0.5
GPU_MEMORY_SHARE = 0.9
PEAK_NA_CPU = ("on the CPU the ranks exchange data through the host's memory and loopback TCP (gloo): "
               "there is no link with a peak to compare with")


def bus_factor(op: str, world: int) -> float:
    """nccl-tests' correction from algbw to busbw for `world` ranks (its doc/PERFORMANCE.md): all-reduce 2(n-1)/n,
    all-gather and reduce-scatter (n-1)/n."""
    if op == "all_reduce":
        return 2 * (world - 1) / world
    if op in ("all_gather", "reduce_scatter"):
        return (world - 1) / world
    raise ValueError(f"unknown collective {op!r}")


def parse_size(text: str, what: str = "--sizes") -> int:
    """'64M' -> 67108864: a whole number of bytes with an optional unit (B, K, M, G; KiB, MiB, GiB; powers of 1024,
    as nccl-tests reads them)."""
    match = re.fullmatch(r"\s*(\d+)\s*([a-zA-Z]*)\s*", text or "")
    unit = match.group(2).lower() if match else None
    if match is None or unit not in SIZE_UNITS:
        raise TorchperfError(f"{what} {text!r}: write a size as a whole number with B, K, M or G, e.g. 1K-64M")
    size = int(match.group(1)) * SIZE_UNITS[unit]
    if size < 1:
        raise TorchperfError(f"{what} {text!r}: a message size must be at least 1 byte")
    if size > SIZE_MAX:
        raise TorchperfError(f"{what} {text!r}: at most {format_bytes(SIZE_MAX)} per message")
    return size


def parse_sizes(text: str) -> tuple[int, int]:
    """'1K-64M' -> (1024, 67108864); one size is a run of one size. One line for anything else."""
    raw = (text or "").strip()
    lo_text, sep, hi_text = raw.partition("-")
    lo = parse_size(lo_text)
    hi = parse_size(hi_text) if sep else lo
    if lo > hi:
        raise TorchperfError(f"--sizes {raw}: MIN ({format_bytes(lo)}) is above MAX ({format_bytes(hi)})")
    return lo, hi


def message_sizes(lo: int, hi: int) -> list[int]:
    """LO, 4 LO, 16 LO, ... up to HI, and HI itself last when the steps do not land on it."""
    sizes = [lo]
    while sizes[-1] * SIZE_STEP <= hi:
        sizes.append(sizes[-1] * SIZE_STEP)
    if sizes[-1] != hi:
        sizes.append(hi)
    return sizes


def sized_for(size: int, world: int) -> int:
    """The size run for `size` across `world` ranks: whole float32 elements in every rank's share (all-gather's and
    reduce-scatter's S is the whole array, n shares), rounded down, and at least one element per rank."""
    share = world * ELEMENT_BYTES
    return max(share, size // share * share)


def parse_ops(text: str) -> tuple[str, ...]:
    """'all_reduce,all-gather' -> ('all_reduce', 'all_gather'), in the order given, each once; 'allreduce' and
    'all-reduce' are all_reduce."""
    known = {op.replace("_", ""): op for op in OPS}
    chosen: list[str] = []
    for word in (text or "").split(","):
        key = word.strip().lower().replace("-", "").replace("_", "")
        if key not in known:
            raise TorchperfError(f"--ops {text!r}: unknown collective {word.strip()!r}; choose from {', '.join(OPS)}")
        if known[key] not in chosen:
            chosen.append(known[key])
    return tuple(chosen)


FEWEST = ("a collective needs 2 ranks or more (across one, nothing crosses a link and busbw's factor (n-1)/n "
          "is 0)")
WORK = "the collectives"


def world_size(value: int | str) -> int:
    """The ranks of a collective: 2 or more (with one, nothing crosses a link and busbw's factor is 0), and at most
    ranks.WORLD_PER_CPU per logical CPU of this process."""
    return ranks.world_size(value, FEWEST)


@dataclass(frozen=True)
class CollectivesSpec:
    """What to run: `world` ranks (None: every GPU on CUDA, DEFAULT_CPU_WORLD on the CPU) on `device` ("auto": CUDA
    where there are two GPUs or more, else the CPU), the collectives `ops`, message sizes from `sizes`' LO to HI,
    and per size `warmup` untimed and `iters` timed iterations."""

    world: int | None = None
    device: str = "auto"
    ops: tuple[str, ...] = OPS
    sizes: tuple[int, int] = parse_sizes(DEFAULT_SIZES)
    iters: int = DEFAULT_ITERS
    warmup: int = DEFAULT_WARMUP

    @property
    def backend(self) -> str:
        return ranks.backend_of(self.device)

    def message_sizes(self) -> list[int]:
        """The sizes run, each as the ranks' shares make it (sized_for), once."""
        world = self.world or ranks.DEFAULT_CPU_WORLD
        return list(dict.fromkeys(sized_for(size, world) for size in message_sizes(*self.sizes)))


@dataclass
class CollectivePoint:
    """One collective at one size: S (`size_bytes`, nccl-tests' S: all-reduce's buffer, all-gather's output,
    reduce-scatter's input), the time (the largest of the ranks' medians), algbw = S / time and busbw = algbw x
    bus_factor, in GB/s (10^9 bytes a second), and busbw's share of the link's peak (None where there is none)."""

    op: str
    size_bytes: int
    time_s: float
    rank_medians_s: list[float]
    algbw_gbs: float
    busbw_gbs: float
    peak_pct: float | None = None


def make_point(op: str, size: int, medians: list[float], peak_gbs: float | None) -> CollectivePoint:
    world = len(medians)
    time_s = max(medians)
    algbw = size / time_s / 1e9
    busbw = algbw * bus_factor(op, world)
    return CollectivePoint(op, size, time_s, list(medians), algbw, busbw,
                           busbw / peak_gbs * 100 if peak_gbs else None)


@dataclass
class CollectivesResult:
    """The run: its spec as resolved (device and world chosen), the backend, what each rank ran on, the link's peak
    (GB/s each way per GPU, or NA with the reason there is none) and where it comes from, a point per collective and
    size, the collectives not run and why, and whether it was cancelled."""

    spec: CollectivesSpec
    backend: str
    devices: list[str]
    peak_gbs: float | NA
    peak_source: str
    points: list[CollectivePoint] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    cancelled: bool = False
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)
    torch_version: str = ""
    dtype: str = DTYPE

    def points_of(self, op: str) -> list[CollectivePoint]:
        return [p for p in self.points if p.op == op]

    def to_dict(self) -> dict[str, Any]:
        data = to_jsonable(self)
        data["world"], data["device"] = self.spec.world, self.spec.device
        return data


# -- choosing the device and the world, in the measurement process ----------------------------------------------

def resolve_spec(spec: CollectivesSpec, notes: list[str] | None = None) -> CollectivesSpec:
    """`spec` with its device and world chosen and checked: a CUDA world past the GPUs, a world past the CPUs, a
    backend torch lacks and buffers past the memory are each one line (TorchperfError). `notes`: what was chosen for
    the user ("one GPU here: ...")."""
    notes = notes if notes is not None else []
    device, world = ranks.choose_world(spec.device, spec.world, FEWEST, WORK, notes)
    resolved = dataclasses.replace(spec, device=device, world=world)
    _check_memory(resolved)
    return resolved


def rank_bytes(op: str, size: int, world: int) -> int:
    """What one rank holds for `op` at S = `size`: all-reduce its buffer (in place), all-gather its share and the
    whole output, reduce-scatter the whole input and its share."""
    return size if op == "all_reduce" else size + size // world


def _check_memory(spec: CollectivesSpec) -> None:
    need = max(rank_bytes(op, size, spec.world) for op in spec.ops for size in spec.message_sizes())
    if spec.device == "cpu":
        have = int(psutil.virtual_memory().available * CPU_MEMORY_SHARE)
        total, where = need * spec.world, f"half of the {format_bytes(psutil.virtual_memory().available)} available"
    else:
        have = int(min(torch.cuda.get_device_properties(i).total_memory for i in range(spec.world)) * GPU_MEMORY_SHARE)
        total, where = need, "nine tenths of the smallest GPU's memory"
    if total > have:
        raise TorchperfError(f"--sizes up to {format_bytes(spec.sizes[1])} across {spec.world} ranks needs about "
                             f"{format_bytes(total)} of buffers{' per GPU' if spec.device == 'cuda' else ''}, "
                             f"more than {where}: give a smaller MAX")


# -- one rank's process ---------------------------------------------------------------------------------------

def measure_rank(rank: int, spec: CollectivesSpec, store: str, events: Any, timeout_s: float) -> None:
    """One rank: join the group, then for every collective and size check the result once, warm up and time each
    iteration between barriers; its median per size goes to `events`, and a sign of life at least every
    ALIVE_EVERY_S."""
    import torch.distributed as dist  # torch itself: this is a rank's own process, which measures

    warnings.filterwarnings("ignore", category=FutureWarning)  # torch renaming its *_tensor collectives
    torch.set_num_threads(1)  # n ranks on the host's cores: one thread each, as the collective needs no more
    device = join_group(rank, spec.device, spec.world, store, timeout_s, events)
    sync = synchronizer(device)
    beat = Heartbeat(events, rank)
    for op in spec.ops:
        for size in spec.message_sizes():
            events.put(("begin", rank, op, size))
            call = collective_call(dist, op, size, spec.world, rank, device)
            try:
                check_once(dist, op, call, spec.world, rank)
            except (NotImplementedError, RuntimeError) as exc:
                if not unsupported(exc):
                    raise
                events.put(("skipped", rank, op, f"{spec.backend} has no {op} here: {first_line(exc)}"))
                break
            for _ in range(spec.warmup):
                call.run()
            sync()
            times = time_between_barriers(dist, {op: call.run}, spec.iters, sync,
                                          lambda done: beat(op, size, done, spec.iters))
            events.put(("median", rank, op, size, medians(times)[op]))
            beat.said()
    dist.barrier()
    dist.destroy_process_group()
    events.put(("done", rank))


def unsupported(exc: BaseException) -> bool:
    """The backend lacks the collective (raised alike on every rank, before anything is sent): it is skipped."""
    text = str(exc).lower()
    return isinstance(exc, NotImplementedError) or "not support" in text or "unsupported" in text


@dataclass
class CollectiveCall:
    """One collective's buffers and its call: `run()` does it once; `send` and `recv` for the check."""

    send: Any
    recv: Any
    run: Callable[[], Any]


def collective_call(dist: Any, op: str, size: int, world: int, rank: int, device: Any) -> CollectiveCall:
    """The buffers of `op` at S = `size` bytes of float32, as nccl-tests sizes them, and its call (out of place but
    for all-reduce, which reduces in place, as a training step's gradient all-reduce does)."""
    count = size // ELEMENT_BYTES
    if op == "all_reduce":
        buffer = torch.zeros(count, dtype=torch.float32, device=device)
        return CollectiveCall(buffer, buffer, lambda: dist.all_reduce(buffer))
    share = count // world
    if op == "all_gather":
        send = torch.zeros(share, dtype=torch.float32, device=device)
        recv = torch.zeros(share * world, dtype=torch.float32, device=device)
        gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
        return CollectiveCall(send, recv, lambda: gather(recv, send))
    send = torch.zeros(share * world, dtype=torch.float32, device=device)
    recv = torch.zeros(share, dtype=torch.float32, device=device)
    scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
    return CollectiveCall(send, recv, lambda: scatter(recv, send))


def check_once(dist: Any, op: str, call: CollectiveCall, world: int, rank: int) -> None:
    """Run `call` once on known values and raise if a rank's result is wrong (as nccl-tests' #wrong); then zero its
    buffers, so that the timed iterations add zeros (no value grows to inf over thousands of all-reduces)."""
    call.send.fill_(rank + 1)
    call.run()
    if op == "all_gather":
        want = torch.arange(1, world + 1, dtype=torch.float32, device=call.recv.device).repeat_interleave(
            call.recv.numel() // world)
        wrong = int((call.recv != want).sum())
    else:
        wrong = int((call.recv != world * (world + 1) / 2).sum())
    if wrong:
        raise RuntimeError(f"{op} gave {wrong} wrong value(s) of {call.recv.numel()} on rank {rank}")
    call.send.zero_()
    call.recv.zero_()


# -- the parent: start the ranks, hear them, stop them ----------------------------------------------------------

class Gathering(RankWatch):
    """The parent's side of a run of collectives: a rank is during a collective of a size, a point is made once
    every rank has sent its median of a size, and a collective the backend lacks is skipped."""

    def __init__(self, spec: CollectivesSpec, peak_gbs: float | None, on_point, on_progress, now: float) -> None:
        super().__init__(spec.world, on_progress, now)
        self.spec, self.peak_gbs, self.on_point = spec, peak_gbs, on_point
        self.points: list[CollectivePoint] = []
        self.skipped: dict[str, str] = {}

    def place(self, where: tuple) -> str:
        """'during all_reduce of 64.0 MiB'."""
        op, size = where
        return f"during {op} of {format_bytes(size)}"

    def complete(self, key: tuple, medians: list[float]) -> None:
        op, size = key
        point = make_point(op, size, medians, self.peak_gbs)
        self.points.append(point)
        self.on_point(point)

    def heard_other(self, message: tuple) -> None:
        if message[0] == "skipped":
            self.skipped.setdefault(message[2], message[3])


def run_collectives(spec: CollectivesSpec, *, on_point: Callable[[CollectivePoint], None] | None = None,
                    on_progress: Callable[..., None] | None = None, on_note: Callable[[str], None] | None = None,
                    should_cancel: Callable[[], bool] | None = None, peak: tuple[float | NA, str] | None = None,
                    body: Callable[..., None] = measure_rank, start_s: float = START_S,
                    silence_s: float = SILENCE_S) -> CollectivesResult:
    """Run `spec`'s collectives across its ranks and return every point. `on_point(point)` as each size is done on
    every rank; `on_progress(op, size, done, total)` about once a second from rank 0; `on_note(line)` for what was
    chosen. `peak`: (GB/s or NA, where it comes from), read from the links by default (world_peak). `body`: what each
    rank runs (measure_rank; tests plant a failing one). A rank that fails, dies or is silent past `start_s` (until
    every rank has joined) or `silence_s` stops them all and raises RankFailed, one line naming it; a cancel stops
    them and returns the points so far."""
    notes: list[str] = []
    spec = resolve_spec(spec, notes)
    for note in notes:
        (on_note or (lambda line: None))(note)
    peak_gbs, peak_source = peak if peak is not None else world_peak(spec)
    started = time.monotonic()
    gathering = Gathering(spec, peak_gbs if isinstance(peak_gbs, float) else None, on_point or (lambda p: None),
                          on_progress, started)
    cancelled = run_ranks(spec, spec.world, body, gathering, should_cancel, start_s, silence_s, name="collectives")
    return CollectivesResult(spec=spec, backend=spec.backend, devices=rank_devices(spec.device, spec.world),
                             peak_gbs=peak_gbs, peak_source=peak_source, points=gathering.points,
                             skipped=gathering.skipped, cancelled=cancelled, seconds=time.monotonic() - started,
                             notes=notes, torch_version=str(torch.__version__))


def world_peak(spec: CollectivesSpec) -> tuple[float | NA, str]:
    """The peak busbw is held against, GB/s each way per GPU, and where it comes from: on CUDA the links of the
    world's GPUs as NVML sees them (engine/hardware/topology.py); NA on the CPU."""
    if spec.device != "cuda":
        return NA(PEAK_NA_CPU), ""
    nvml = default_nvml()
    cuda = TorchCudaBackend()
    indices = [nvml_index_for(nvml, cuda, rank) for rank in range(spec.world)]
    missing = next((index for index in indices if isinstance(index, NA)), None)
    if missing is not None:
        return NA(f"the GPUs' links are unknown: {missing.reason}"), ""
    return link_peak(probe_topology(nvml), indices)
