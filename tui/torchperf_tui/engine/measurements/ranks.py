"""Ranks across processes, as torch.distributed expects them: what `collectives` and `ddp` share. The world chosen
and checked against the box, the ranks started (one process per rank from torch.multiprocessing, spawn), joined
(a FileStore in a temporary folder of the run's own: no port to find free, none left behind; gloo on the CPU, NCCL on
CUDA with one GPU per rank), timed between barriers, heard and stopped.

The parent only starts the ranks, hears them on a queue and stops them: when the job is cancelled, when one rank
fails (the others would wait for it until their timeout), or when they fall silent past a deadline; each of those is
one line naming the rank (RankFailed). A rank dies with its parent (PR_SET_PDEATHSIG), and ignores Ctrl-C, which its
parent decides on.

Loads without torch (the CLI parses a spec and the UI reads a result); torch is imported where a rank runs.
"""

from __future__ import annotations

import os
import queue
import shutil
import signal
import statistics
import tempfile
import time
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Callable

from torchperf_tui.core.parent_death import signal_on_parent_death
from torchperf_tui.core import options
from torchperf_tui.core.errors import TorchperfError, user_message
from torchperf_tui.engine.hardware.lazy_torch import torch

DEFAULT_CPU_WORLD = 2
WORLD_PER_CPU = 4  # ranks per logical CPU at most: each is a process with an interpreter and torch of its own
# How long the ranks may stay silent: while they start (an interpreter each, torch imported, the group formed) and
# once they run (each rank says it is alive at least every ALIVE_EVERY_S between iterations). Both below the
# measurement process's own deadlines (measure/deadlines.py), so a stuck rank is said here, by its number.
START_S = 180.0
SILENCE_S = 120.0
ALIVE_EVERY_S = 1.0
POLL_S = 0.2  # how often the parent looks at its ranks and its cancel flag


class RankFailed(TorchperfError):
    """A rank failed, died or fell silent: one line naming it, where it was and why."""


# -- the world, chosen and checked in the measurement process ---------------------------------------------------

def world_size(value: int | str, fewest: str) -> int:
    """The ranks of a run: 2 or more (`fewest`: why one is not enough, in the run's words), and at most
    WORLD_PER_CPU per logical CPU of this process (each rank is a process with an interpreter and torch of its
    own)."""
    world = options.whole_number("--world", value)
    if world < 2:
        raise options.OptionError(f"--world {world}: {fewest}")
    most = options.cpu_count() * WORLD_PER_CPU
    if world > most:
        raise options.OptionError(f"--world {world}: at most {most} ranks here ({WORLD_PER_CPU} per logical CPU of "
                                  f"the {options.cpu_count()} this process has): each rank is a process of its own")
    return world


def backend_of(device: str) -> str:
    """NCCL on CUDA, gloo on the CPU."""
    return "nccl" if device == "cuda" else "gloo"


def choose_world(device: str, world: int | None, fewest: str, work: str,
                 notes: list[str]) -> tuple[str, int]:
    """(device, world) for a run asked on `device` ("auto": CUDA where there are two GPUs or more, else the CPU)
    with `world` ranks (None: every GPU on CUDA, DEFAULT_CPU_WORLD on the CPU); `fewest` why one rank is not enough,
    `work` what the ranks run ("the collectives"), in the lines. A CUDA world past the GPUs, a world past the CPUs and
    a backend torch lacks are each one line (TorchperfError); `notes` gets what was chosen for the user."""
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if device == "auto":
        device = "cuda" if gpus >= 2 else "cpu"
        if gpus == 1:
            notes.append(f"one GPU here: {work} run across processes on the CPU (gloo); --device cuda needs two GPUs "
                         "or more")
    if device not in ("cpu", "cuda"):
        raise TorchperfError(f"--device {device!r}: {work} run on cpu or cuda (every GPU from 0, one per rank; "
                             "CUDA_VISIBLE_DEVICES chooses which)")
    if device == "cuda":
        if gpus == 0:
            raise TorchperfError(f"--device cuda: torch sees no CUDA device here (--device cpu runs {work} with gloo "
                                 "across processes)")
        if gpus == 1:
            raise TorchperfError(f"--device cuda: this box has 1 GPU: {work} across GPUs need two or more "
                                 f"(--device cpu runs them with gloo across processes)")
        world = world_size(world if world is not None else gpus, fewest)
        if world > gpus:
            raise TorchperfError(f"--world {world}: this box has {gpus} GPU(s) that torch sees, and NCCL runs one "
                                 f"rank per GPU (give --world {'2-' if gpus > 2 else ''}{gpus}, or --device cpu)")
        if not torch.distributed.is_nccl_available():
            raise TorchperfError(f"this torch has no NCCL: {work} on CUDA need it (--device cpu uses gloo)")
    else:
        world = world_size(world if world is not None else DEFAULT_CPU_WORLD, fewest)
        if not torch.distributed.is_gloo_available():
            raise TorchperfError(f"this torch has no gloo: {work} on the CPU need it")
    return device, world


def rank_devices(device: str, world: int) -> list[str]:
    """What each rank ran on: 'cpu', or 'cuda:0 (NVIDIA H100 80GB HBM3)'."""
    if device != "cuda":
        return ["cpu"] * world
    return [f"cuda:{i} ({torch.cuda.get_device_name(i)})" for i in range(world)]


# -- one rank's process ---------------------------------------------------------------------------------------

def rank_main(rank: int, body: Callable[..., None], spec: Any, store: str, events: Any,
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


def join_group(rank: int, device: str, world: int, store: str, timeout_s: float, events: Any) -> Any:
    """Join the group of `world` ranks through the FileStore `store` (NCCL on CUDA with GPU `rank` as this rank's
    device, gloo on the CPU), say so on `events`, and return the rank's torch.device."""
    import torch.distributed as dist  # torch itself: this is a rank's own process

    where = torch.device("cpu")
    group_options = {}
    if device == "cuda":
        torch.cuda.set_device(rank)
        where = torch.device("cuda", rank)
        group_options["device_id"] = where
    dist.init_process_group(backend_of(device), init_method=f"file://{store}", rank=rank, world_size=world,
                            timeout=timedelta(seconds=timeout_s), **group_options)
    events.put(("ready", rank))
    return where


def synchronizer(device: Any) -> Callable[[], None]:
    """What waits for the rank's device: torch.cuda.synchronize on a GPU, nothing on the CPU."""
    return torch.cuda.synchronize if device.type == "cuda" else (lambda: None)


class Heartbeat:
    """A rank's sign of life: ("alive", rank, *what) on `events` at most every ALIVE_EVERY_S."""

    def __init__(self, events: Any, rank: int) -> None:
        self.events, self.rank, self.said_at = events, rank, time.monotonic()

    def __call__(self, *what: Any) -> None:
        if time.monotonic() - self.said_at >= ALIVE_EVERY_S:
            self.said()
            self.events.put(("alive", self.rank, *what))

    def said(self) -> None:
        """Something else was said just now: it counts as a sign of life."""
        self.said_at = time.monotonic()


def time_between_barriers(dist: Any, calls: dict[str, Callable[[], Any]], rounds: int, sync: Callable[[], None],
                          beat: Callable[[int], None]) -> dict[str, list[float]]:
    """`rounds` rounds of every call in `calls`, in their order, each timed alone between barriers (every rank
    starts it together, its device synchronised before and after): the seconds of each, by name. `beat(done)` after
    each round."""
    times: dict[str, list[float]] = {name: [] for name in calls}
    for done in range(1, rounds + 1):
        for name, call in calls.items():
            dist.barrier()
            sync()
            start = time.perf_counter()
            call()
            sync()
            times[name].append(time.perf_counter() - start)
        beat(done)
    return times


def medians(times: dict[str, list[float]]) -> dict[str, float]:
    """The median of each call's seconds."""
    return {name: statistics.median(seconds) for name, seconds in times.items()}


# -- the parent: start the ranks, hear them, stop them ----------------------------------------------------------

@dataclass
class RankState:
    """What the parent knows of one rank: when it was last heard, where it is (`at`, in words: 'during all_reduce
    of 64.0 MiB'), and how far it has come (a step for joining the group, each part begun and each median sent: the
    ranks behind the others are those the others wait for)."""

    heard_at: float
    ready: bool = False
    at: str | None = None
    steps: int = 0
    done: bool = False

    def where(self) -> str:
        """`at`, else 'while joining the group' or 'after joining the group'."""
        if self.at is not None:
            return self.at
        return "after joining the group" if self.ready else "while joining the group"


def exit_text(code: int | None) -> str:
    """'was killed (SIGKILL)', 'exited with code 3'."""
    if code is not None and code < 0:
        try:
            return f"was killed ({signal.Signals(-code).name})"
        except ValueError:
            return f"was killed (signal {-code})"
    return f"exited with code {code}"


class RankWatch:
    """The parent's side of a run: what each rank said, and the line for a rank that failed, died or fell silent.

    Every rank says ("ready", rank) once in the group, ("begin", rank, *where) as it starts a part, ("alive", rank,
    *progress) about once a second (rank 0's go to `on_progress`), ("median", rank, *key, seconds) per part timed and
    ("done", rank) at its end. A run's own watch says where a rank is in words (`place`), takes a key's medians once
    every rank has sent its own (`complete`), and any message of its own kind (`heard_other`)."""

    def __init__(self, world: int, on_progress: Callable[..., None] | None, now: float) -> None:
        self.world = world
        self.on_progress = on_progress or (lambda *a: None)
        self.ranks = [RankState(now) for _ in range(world)]
        self.pending: dict[tuple, dict[int, float]] = {}

    def place(self, where: tuple) -> str:
        """Where a ("begin", rank, *where) puts the rank, in words after 'rank 1 failed ...'."""
        return "during " + " ".join(str(part) for part in where)

    def complete(self, key: tuple, medians: list[float]) -> None:
        """Every rank has sent its median of `key`, here in rank order."""

    def heard_other(self, message: tuple) -> None:
        """A message of a kind the watch itself does not know."""

    def finished(self) -> bool:
        return all(state.done for state in self.ranks)

    def hear(self, message: tuple, now: float) -> None:
        kind, rank = message[0], message[1]
        state = self.ranks[rank]
        state.heard_at = now
        if kind == "failed":
            raise RankFailed(f"rank {rank} failed {state.where()}: {message[2]}")
        if kind == "ready":
            state.ready = True
            state.steps += 1
        elif kind == "begin":
            state.at = self.place(message[2:])
            state.steps += 1
        elif kind == "alive":
            if rank == 0:
                self.on_progress(*message[2:])
        elif kind == "median":
            state.steps += 1
            key, median = tuple(message[2:-1]), message[-1]
            got = self.pending.setdefault(key, {})
            got[rank] = median
            if len(got) == self.world:
                del self.pending[key]
                self.complete(key, [got[r] for r in range(self.world)])
        elif kind == "done":
            state.done = True
        else:
            self.heard_other(message)

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
        return (f"rank{'s' if len(behind) > 1 else ''} {ranks} {what}: stopped the {self.world} ranks "
                "(a rank stuck in its collective, or a box too busy to run them)")

    def died_line(self, rank: int, code: int | None) -> str:
        return f"rank {rank} {exit_text(code)} {self.ranks[rank].where()}"


def run_ranks(spec: Any, world: int, body: Callable[..., None], watch: RankWatch,
              should_cancel: Callable[[], bool] | None = None, start_s: float = START_S,
              silence_s: float = SILENCE_S, name: str = "ranks") -> bool:
    """Start `world` ranks, each running `body(rank, spec, store, events, timeout_s)`, hear them through `watch`
    until every one is done (False) or the job is cancelled (True), and stop them. A rank that fails, dies or is
    silent past `start_s` (until every rank has joined) or `silence_s` stops them all and raises RankFailed, one
    line naming it. `name`: the temporary folder's prefix."""
    folder = tempfile.mkdtemp(prefix=f"torchperf-{name}-")
    mp = torch.multiprocessing
    events = mp.get_context("spawn").Queue()
    context = None
    try:
        context = mp.start_processes(rank_main, args=(body, spec, os.path.join(folder, "store"), events, os.getpid(),
                                                      silence_s + start_s), nprocs=world, join=False,
                                     start_method="spawn")
        return _gather(watch, context.processes, events, should_cancel or (lambda: False), start_s, silence_s)
    finally:
        _stop(context.processes if context is not None else [])
        events.close()
        events.cancel_join_thread()
        shutil.rmtree(folder, ignore_errors=True)


def _gather(watch: RankWatch, processes: list, events: Any, should_cancel: Callable[[], bool], start_s: float,
            silence_s: float) -> bool:
    """Hear the ranks until every one is done (False) or the job is cancelled (True); raise RankFailed."""
    while not watch.finished():
        if should_cancel():
            return True
        try:
            message = events.get(timeout=POLL_S)
        except queue.Empty:
            message = None
        now = time.monotonic()
        if message is not None:
            watch.hear(message, now)
            continue
        for rank, process in enumerate(processes):
            if process.exitcode is not None and not watch.ranks[rank].done:
                _drain(watch, events, now)  # its own line, if it said one before it went
                if watch.ranks[rank].done and process.exitcode == 0:
                    continue  # its "done" was still on its way: it ended as it should
                raise RankFailed(watch.died_line(rank, process.exitcode))
        line = watch.silent_line(now, start_s, silence_s)
        if line:
            raise RankFailed(line)
    return False


def _drain(watch: RankWatch, events: Any, now: float) -> None:
    while True:
        try:
            message = events.get(timeout=POLL_S)
        except queue.Empty:
            return
        watch.hear(message, now)


def _stop(processes: list) -> None:
    """Every rank still there is killed (one blocked in a collective would never act on a gentler signal), and
    waited for."""
    for process in processes:
        if process.is_alive():
            process.kill()
    for process in processes:
        process.join(timeout=5)
