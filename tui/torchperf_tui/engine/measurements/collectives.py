"""Collectives across processes: all-reduce, all-gather and reduce-scatter over message sizes, each size's time,
algorithm bandwidth (algbw) and bus bandwidth (busbw) as nccl-tests defines them, against the link's peak.

The ranks are started as torch.distributed expects: one process per rank from torch.multiprocessing (spawn), which
meet through a FileStore in a temporary folder of their own (no port to find free, none left behind); gloo on the
CPU, NCCL on CUDA with one GPU per rank. Each rank times every iteration between barriers and sends its median per
size; the size's time is the largest of the ranks' medians (a collective has ended when its slowest rank has).

This process only starts the ranks, hears them on a queue and stops them: when the job is cancelled, when one rank
fails (the others would wait for it until their timeout), or when they fall silent past a deadline. A rank dies
with this process (PR_SET_PDEATHSIG), and ignores Ctrl-C, which its parent decides on.

Loads without torch (the CLI parses the spec and the UI reads the result); torch is imported where a rank measures.
"""

from __future__ import annotations

import dataclasses
import os
import queue
import re
import shutil
import signal
import statistics
import tempfile
import time
import warnings
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Callable

import psutil

from torchperf_tui.core.parent_death import signal_on_parent_death
from torchperf_tui.core import options
from torchperf_tui.core.errors import TorchperfError, first_line, user_message
from torchperf_tui.core.formatting import format_bytes
from torchperf_tui.engine.hardware.lazy_torch import torch
from torchperf_tui.engine.hardware.device import TorchCudaBackend, nvml_index_for
from torchperf_tui.engine.hardware.nvml import NA, default_nvml, to_jsonable
from torchperf_tui.engine.hardware.topology import link_peak, probe_topology

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
DEFAULT_CPU_WORLD = 2
WORLD_PER_CPU = 4  # ranks per logical CPU at most: each is a process with an interpreter and torch of its own
# How long the ranks may stay silent: while they start (an interpreter each, torch imported, the group formed) and
# once they measure (each rank says it is alive at least every ALIVE_EVERY_S between iterations). Both below the
# measurement process's own deadlines (measure/deadlines.py), so a stuck rank is said here, by its number.
START_S = 180.0
SILENCE_S = 120.0
ALIVE_EVERY_S = 1.0
POLL_S = 0.2  # how often the parent looks at its ranks and its cancel flag
# Memory the buffers of every rank may take on the CPU: half of what the box has available (the rest is the ranks'
# interpreters, torch and whatever else runs); on a GPU, the GPU's memory less a tenth for NCCL and the context.
CPU_MEMORY_SHARE = 0.5
GPU_MEMORY_SHARE = 0.9
PEAK_NA_CPU = ("on the CPU the ranks exchange data through the host's memory and loopback TCP (gloo): "
               "there is no link with a peak to compare with")


class CollectiveFailed(TorchperfError):
    """A rank failed, died or fell silent: one line naming it, its collective and why."""


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


def world_size(value: int | str) -> int:
    """The ranks of a collective: 2 or more (with one, nothing crosses a link and busbw's factor is 0), and at most
    four per logical CPU of this process (each rank is a process with an interpreter and torch of its own)."""
    world = options.whole_number("--world", value)
    if world < 2:
        raise options.OptionError(f"--world {world}: a collective needs 2 ranks or more (across one, nothing "
                                  "crosses a link and busbw's factor (n-1)/n is 0)")
    most = options.cpu_count() * WORLD_PER_CPU
    if world > most:
        raise options.OptionError(f"--world {world}: at most {most} ranks here ({WORLD_PER_CPU} per logical CPU of "
                                  f"the {options.cpu_count()} this process has): each rank is a process of its own")
    return world


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
        return "nccl" if self.device == "cuda" else "gloo"

    def message_sizes(self) -> list[int]:
        """The sizes run, each as the ranks' shares make it (sized_for), once."""
        world = self.world or DEFAULT_CPU_WORLD
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
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    device = spec.device
    if device == "auto":
        device = "cuda" if gpus >= 2 else "cpu"
        if gpus == 1:
            notes.append("one GPU here: the collectives run across processes on the CPU (gloo); --device cuda "
                         "needs two GPUs or more")
    if device not in ("cpu", "cuda"):
        raise TorchperfError(f"--device {spec.device!r}: collectives run on cpu or cuda (every GPU from 0, one per "
                             "rank; CUDA_VISIBLE_DEVICES chooses which)")
    if device == "cuda":
        if gpus == 0:
            raise TorchperfError("--device cuda: torch sees no CUDA device here (--device cpu runs the collectives "
                                 "with gloo across processes)")
        if gpus == 1:
            raise TorchperfError("--device cuda: this box has 1 GPU: a collective across GPUs needs two or more "
                                 "(--device cpu runs them with gloo across processes)")
        world = world_size(spec.world if spec.world is not None else gpus)
        if world > gpus:
            raise TorchperfError(f"--world {world}: this box has {gpus} GPU(s) that torch sees, and NCCL runs one "
                                 f"rank per GPU (give --world {'2-' if gpus > 2 else ''}{gpus}, or --device cpu)")
        if not torch.distributed.is_nccl_available():
            raise TorchperfError("this torch has no NCCL: collectives on CUDA need it (--device cpu uses gloo)")
    else:
        world = world_size(spec.world if spec.world is not None else DEFAULT_CPU_WORLD)
        if not torch.distributed.is_gloo_available():
            raise TorchperfError("this torch has no gloo: collectives on the CPU need it")
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

def rank_main(rank: int, body: Callable[..., None], spec: CollectivesSpec, store: str, events: Any,
              parent: int, timeout_s: float) -> None:
    """One rank's process, as torch.multiprocessing starts it: dies with its parent, ignores Ctrl-C (the parent
    cancels), runs `body(rank, spec, store, events, timeout_s)` and says on `events` why it failed, in one line."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the terminal's whole process group
    die_with_parent(parent)
    try:
        body(rank, spec, store, events, timeout_s)
    except BaseException as exc:  # noqa: BLE001 - whatever it is, the parent hears it in one line
        events.put(("failed", rank, user_message(exc)))
        events.close()
        events.join_thread()  # the line is on its way before the process goes
        os._exit(1)  # no interpreter clean-up: a process group or a CUDA context must not hold the exit


def die_with_parent(parent: int) -> None:
    """Linux: SIGKILL this process when the process that started it ends (torch's own wrapper asks for SIGINT, which
    a rank blocked in a collective would never act on), and end now if it has already gone."""
    if not signal_on_parent_death(signal.SIGKILL):
        return
    if os.getppid() != parent:
        os._exit(1)


def measure_rank(rank: int, spec: CollectivesSpec, store: str, events: Any, timeout_s: float) -> None:
    """One rank: join the group, then for every collective and size check the result once, warm up and time each
    iteration between barriers; its median per size goes to `events`, and a sign of life at least every
    ALIVE_EVERY_S."""
    import torch.distributed as dist  # torch itself: this is a rank's own process, which measures

    warnings.filterwarnings("ignore", category=FutureWarning)  # torch renaming its *_tensor collectives
    torch.set_num_threads(1)  # n ranks on the host's cores: one thread each, as the collective needs no more
    device = torch.device("cpu")
    group_options = {}
    if spec.device == "cuda":
        torch.cuda.set_device(rank)
        device = torch.device("cuda", rank)
        group_options["device_id"] = device
    dist.init_process_group(spec.backend, init_method=f"file://{store}", rank=rank, world_size=spec.world,
                            timeout=timedelta(seconds=timeout_s), **group_options)
    events.put(("ready", rank))
    sync = torch.cuda.synchronize if spec.device == "cuda" else (lambda: None)
    said_at = time.monotonic()
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
            times = []
            for i in range(spec.iters):
                dist.barrier()
                sync()
                start = time.perf_counter()
                call.run()
                sync()
                times.append(time.perf_counter() - start)
                if time.monotonic() - said_at >= ALIVE_EVERY_S:
                    said_at = time.monotonic()
                    events.put(("alive", rank, op, size, i + 1, spec.iters))
            events.put(("median", rank, op, size, statistics.median(times)))
            said_at = time.monotonic()
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

@dataclass
class RankState:
    """What the parent knows of one rank: when it was last heard, where it is, and how far it has come (a step for
    joining the group, each collective and size begun and each median sent: the ranks behind the others are those
    the others wait for)."""

    heard_at: float
    ready: bool = False
    at: tuple[str, int] | None = None
    steps: int = 0
    done: bool = False

    def where(self) -> str:
        """'during all_reduce of 64.0 MiB', 'while joining the group', 'after joining the group'."""
        if self.at is not None:
            return f"during {self.at[0]} of {format_bytes(self.at[1])}"
        return "after joining the group" if self.ready else "while joining the group"


def exit_text(code: int | None) -> str:
    """'was killed (SIGKILL)', 'exited with code 3'."""
    if code is not None and code < 0:
        try:
            return f"was killed ({signal.Signals(-code).name})"
        except ValueError:
            return f"was killed (signal {-code})"
    return f"exited with code {code}"


class Gathering:
    """The parent's side of a run: what each rank said, the points made once every rank has sent its median of a
    size, and the line for a rank that failed, died or fell silent."""

    def __init__(self, spec: CollectivesSpec, peak_gbs: float | None, on_point, on_progress, now: float) -> None:
        self.spec, self.peak_gbs = spec, peak_gbs
        self.on_point, self.on_progress = on_point, on_progress
        self.ranks = [RankState(now) for _ in range(spec.world)]
        self.medians: dict[tuple[str, int], dict[int, float]] = {}
        self.points: list[CollectivePoint] = []
        self.skipped: dict[str, str] = {}

    def finished(self) -> bool:
        return all(state.done for state in self.ranks)

    def hear(self, message: tuple, now: float) -> None:
        kind, rank = message[0], message[1]
        state = self.ranks[rank]
        state.heard_at = now
        if kind == "failed":
            raise CollectiveFailed(f"rank {rank} failed {state.where()}: {message[2]}")
        if kind == "ready":
            state.ready = True
            state.steps += 1
        elif kind == "begin":
            state.at = (message[2], message[3])
            state.steps += 1
        elif kind == "alive":
            if rank == 0:
                self.on_progress(*message[2:])
        elif kind == "skipped":
            self.skipped.setdefault(message[2], message[3])
        elif kind == "median":
            state.steps += 1
            _, _, op, size, median = message
            got = self.medians.setdefault((op, size), {})
            got[rank] = median
            if len(got) == self.spec.world:
                point = make_point(op, size, [got[r] for r in range(self.spec.world)], self.peak_gbs)
                self.points.append(point)
                del self.medians[(op, size)]
                self.on_point(point)
        elif kind == "done":
            state.done = True

    def silent_line(self, now: float, start_s: float, silence_s: float) -> str | None:
        """The line once every rank has been silent past its deadline (`start_s` until all have joined the group,
        then `silence_s`), naming the ranks behind the others (which the others wait for); else None."""
        ready = all(state.ready for state in self.ranks)
        allowed = silence_s if ready else start_s
        if min(now - state.heard_at for state in self.ranks) < allowed:
            return None
        going = [(rank, state) for rank, state in enumerate(self.ranks) if not state.done]
        least = min(state.steps for _, state in going)
        behind = [(rank, state) for rank, state in going if state.steps == least]
        ranks = ", ".join(str(rank) for rank, _ in behind)
        what = (f"did not join the group within {allowed:g} s" if not behind[0][1].ready
                else f"said nothing for {allowed:g} s {behind[0][1].where()}")
        return (f"rank{'s' if len(behind) > 1 else ''} {ranks} {what}: stopped the {self.spec.world} ranks "
                "(a rank stuck in its collective, or a box too busy to run them)")

    def died_line(self, rank: int, code: int | None) -> str:
        return f"rank {rank} {exit_text(code)} {self.ranks[rank].where()}"


def run_collectives(spec: CollectivesSpec, *, on_point: Callable[[CollectivePoint], None] | None = None,
                    on_progress: Callable[..., None] | None = None, on_note: Callable[[str], None] | None = None,
                    should_cancel: Callable[[], bool] | None = None, peak: tuple[float | NA, str] | None = None,
                    body: Callable[..., None] = measure_rank, start_s: float = START_S,
                    silence_s: float = SILENCE_S) -> CollectivesResult:
    """Run `spec`'s collectives across its ranks and return every point. `on_point(point)` as each size is done on
    every rank; `on_progress(op, size, done, total)` about once a second from rank 0; `on_note(line)` for what was
    chosen. `peak`: (GB/s or NA, where it comes from), read from the links by default (world_peak). `body`: what each
    rank runs (measure_rank; tests plant a failing one). A rank that fails, dies or is silent past `start_s` (until
    every rank has joined) or `silence_s` stops them all and raises CollectiveFailed, one line naming it; a cancel
    stops them and returns the points so far."""
    notes: list[str] = []
    spec = resolve_spec(spec, notes)
    for note in notes:
        (on_note or (lambda line: None))(note)
    peak_gbs, peak_source = peak if peak is not None else world_peak(spec)
    started = time.monotonic()
    gathering = Gathering(spec, peak_gbs if isinstance(peak_gbs, float) else None, on_point or (lambda p: None),
                          on_progress or (lambda *a: None), started)
    cancelled = False
    folder = tempfile.mkdtemp(prefix="torchperf-collectives-")
    mp = torch.multiprocessing
    events = mp.get_context("spawn").Queue()
    context = None
    try:
        context = mp.start_processes(rank_main, args=(body, spec, os.path.join(folder, "store"), events, os.getpid(),
                                                      silence_s + start_s), nprocs=spec.world, join=False,
                                     start_method="spawn")
        cancelled = _gather(gathering, context.processes, events, should_cancel or (lambda: False), start_s,
                            silence_s)
    finally:
        _stop(context.processes if context is not None else [])
        events.close()
        events.cancel_join_thread()
        shutil.rmtree(folder, ignore_errors=True)
    return CollectivesResult(spec=spec, backend=spec.backend, devices=rank_devices(spec), peak_gbs=peak_gbs,
                             peak_source=peak_source, points=gathering.points, skipped=gathering.skipped,
                             cancelled=cancelled, seconds=time.monotonic() - started, notes=notes,
                             torch_version=str(torch.__version__))


def _gather(gathering: Gathering, processes: list, events: Any, should_cancel: Callable[[], bool], start_s: float,
            silence_s: float) -> bool:
    """Hear the ranks until every one is done (False) or the job is cancelled (True); raise CollectiveFailed."""
    while not gathering.finished():
        if should_cancel():
            return True
        try:
            message = events.get(timeout=POLL_S)
        except queue.Empty:
            message = None
        now = time.monotonic()
        if message is not None:
            gathering.hear(message, now)
            continue
        for rank, process in enumerate(processes):
            if process.exitcode is not None and not gathering.ranks[rank].done:
                _drain(gathering, events, now)  # its own line, if it said one before it went
                if gathering.ranks[rank].done and process.exitcode == 0:
                    continue  # its "done" was still on its way: it ended as it should
                raise CollectiveFailed(gathering.died_line(rank, process.exitcode))
        line = gathering.silent_line(now, start_s, silence_s)
        if line:
            raise CollectiveFailed(line)
    return False


def _drain(gathering: Gathering, events: Any, now: float) -> None:
    while True:
        try:
            message = events.get(timeout=POLL_S)
        except queue.Empty:
            return
        gathering.hear(message, now)


def _stop(processes: list) -> None:
    """Every rank still there is killed (one blocked in a collective would never act on a gentler signal), and
    waited for."""
    for process in processes:
        if process.is_alive():
            process.kill()
    for process in processes:
        process.join(timeout=5)


def rank_devices(spec: CollectivesSpec) -> list[str]:
    """What each rank ran on: 'cpu', or 'cuda:0 (NVIDIA H100 80GB HBM3)'."""
    if spec.device != "cuda":
        return ["cpu"] * spec.world
    return [f"cuda:{i} ({torch.cuda.get_device_name(i)})" for i in range(spec.world)]


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
