"""The one place where numbers a user types are checked: finite, in range, said in one line when not.

The CLI's argparse types, the A/B SPEC parser and the app's constructor all call these, so `--interval nan`,
`threads=99999` or `--seed -5` is refused where it enters, before any work starts. No torch, no Textual:
checking an option must cost nothing.
"""

from __future__ import annotations

import math
import os

from torchperf_tui.core.errors import TorchperfError
from torchperf_tui.core.input_files import file_kind
from torchperf_tui.core.json_checks import shown

# Seeds feed numpy's and torch's generators; numpy takes 0 .. 2**32 - 1.
SEED_MAX = 2**32 - 1
# Blocks per arm of an A/B comparison: at least the pairs a verdict needs (engine.measurements.ab_result.MIN_PAIRS: with 5 the
# signed-rank test's smallest p is 0.0625), and at most ten thousand: past a few hundred pairs the CI no longer
# narrows in any way a reader would see, and the block order and shape schedule are lists of that length.
AB_BLOCKS_RANGE = (6, 10_000)
# Timed iterations per block: a block should be short, so that its neighbour of the other arm meets the same
# state of the machine; a thousand is already long (and blocks x per-block shapes are planned up front).
AB_PER_BLOCK_MAX = 1_000
# A comparison's default time budget: two arms, so twice bench's 60 s.
AB_TIME_BUDGET_S = 120.0
# Timed iterations of a run: a hundred thousand is already far past where p99's interval stops narrowing, and each
# sample is kept (in the result, its record, the app's plots); past it a typo (an extra zero or five) ran for
# hours or failed in an allocation. The time budget, not this, is what bounds a slow model's run.
ITERS_MAX = 100_000
# Warm-up iterations: a model settles within tens of passes ('auto' stops when it has); ten thousand is generous.
WARMUP_MAX = 10_000
# Passes recorded one by one (profiled, traced, a memory history, a determinism check): each adds to a trace or a
# snapshot kept whole, so a thousand is plenty.
RECORDED_MAX = 1_000
# A tensor's dimension (a batch, a length, a shape's): it must fit a 32-bit index, past which torch fails with an
# overflow deep inside, or the meta-device analysis reports nonsense.
MAX_DIM = 2**31 - 1
# The app's telemetry period: below 0.1 s the event loop does little but sample; above a minute the
# time series say nothing.
INTERVAL_RANGE = (0.1, 60.0)
# What `export --format` writes (wording/history_export.py): named here so the parser lists them without the records.
EXPORT_FORMATS: tuple[str, ...] = ("json", "csv", "md", "github-benchmark", "pytorch-v3")
# github-benchmark's two files (export_fleet.py): latencies, smaller is better; rates, bigger is better.
EXPORT_METRICS: tuple[str, ...] = ("latency", "throughput")


class OptionError(TorchperfError):
    """A number outside what the option accepts."""


def finite_float(name: str, value: float | str, *, low: float | None = None, high: float | None = None,
                 low_inclusive: bool = True) -> float:
    """`value` as a float that is finite and within [low, high] (or (low, high] when not low_inclusive)."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise OptionError(f"{name}: expected a number, got {shown(value)}") from None
    if not math.isfinite(number):
        raise OptionError(f"{name}: expected a finite number, got {shown(value)}")
    if low is not None and (number < low or (number == low and not low_inclusive)):
        bound = f">= {low:g}" if low_inclusive else f"> {low:g}"
        raise OptionError(f"{name}: must be {bound}" + (f" and <= {high:g}" if high is not None else "")
                          + f", got {number:g}")
    if high is not None and number > high:
        raise OptionError(f"{name}: must be <= {high:g}, got {number:g}")
    return number


def whole_number(name: str, value: int | str, *, low: int | None = None, high: int | None = None,
                 grouped: bool = True) -> int:
    """`value` as an int within [low, high]. A bound is written as the tool writes counts (2,147,483,647) unless
    not `grouped` (a port, a seed: identifiers, not counts)."""
    if isinstance(value, bool):
        raise OptionError(f"{name}: expected a whole number, got {shown(value)}")
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise OptionError(f"{name}: expected a whole number, got {shown(value)}") from None
    group = "," if grouped else ""
    if low is not None and number < low:
        raise OptionError(f"{name}: must be at least {low:{group}}, got {shown(number)}")
    if high is not None and number > high:
        raise OptionError(f"{name}: must be at most {high:{group}}, got {shown(number)}")
    return number


def positive_int(value: int | str, name: str = "a count") -> int:
    """A whole number >= 1 (iterations, blocks, a batch, rows)."""
    return whole_number(name, value, low=1)


def batch_bound(value: int | str, name: str = "--max-batch") -> int:
    """The largest batch a search may try: 1 .. MAX_DIM (a batch past it is no tensor's first dimension)."""
    return whole_number(name, value, low=1, high=MAX_DIM)


def iters(value: int | str, name: str = "iters") -> int:
    """Timed iterations: 1 .. ITERS_MAX (the CLI's --iters and the app's iters field alike)."""
    return whole_number(name, value, low=1, high=ITERS_MAX)


def new_tokens(value: int | str, name: str = "--generate") -> int:
    """Tokens a generation produces: 1 .. ITERS_MAX (each is a timed decode step, kept as a sample; the model's
    maximum positions bound it further where it is known)."""
    return whole_number(name, value, low=1, high=ITERS_MAX)


def recorded_passes(value: int | str, name: str = "--iters") -> int:
    """Passes recorded one by one (profiled, a memory history, a determinism check): 1 .. RECORDED_MAX."""
    return whole_number(name, value, low=1, high=RECORDED_MAX)


def warmup(value: int | str) -> int | str:
    """Warm-up iterations: a count 0 .. WARMUP_MAX, or 'auto' (until the iteration time settles)."""
    if isinstance(value, str) and value.strip() == "auto":
        return "auto"
    try:
        return whole_number("warm-up", value, low=0, high=WARMUP_MAX)
    except OptionError:
        raise OptionError(f"warm-up: expected a count 0-{WARMUP_MAX:,} or 'auto', got {shown(value)}") from None


def cpu_count() -> int:
    """Logical CPUs this process may run on (its affinity where the platform has one)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def thread_count(value: int | str) -> int:
    """An intra-op thread count: 1 .. the logical CPUs this process has. More only oversubscribes the cores
    (and 99,999 would exhaust the machine's PIDs), so it is refused with what the machine has."""
    cpus = cpu_count()
    number = whole_number("threads", value, low=1)
    if number > cpus:
        raise OptionError(f"threads={shown(number)}: this machine gives the process {cpus} logical CPU(s); "
                          f"choose 1-{cpus}")
    return number


def seed(value: int | str, name: str = "seed") -> int:
    return whole_number(name, value, low=0, high=SEED_MAX, grouped=False)  # an identifier, as a port


def interval(value: float | str) -> float:
    """The telemetry period in seconds."""
    low, high = INTERVAL_RANGE
    return finite_float("interval", value, low=low, high=high)


def time_budget(value: float | str, name: str = "--time-budget") -> float:
    """Seconds a search may take: 0 means no budget; at most a day."""
    return finite_float(name, value, low=0.0, high=86_400.0)


def threshold_pct(value: float | str, name: str = "--threshold") -> float:
    """A share of the pass in percent: 0 (every finding listed) to 100."""
    return finite_float(name, value, low=0.0, high=100.0)


def verify_count(value: int | str, name: str = "--verify") -> int:
    """How many findings' fixes to measure: 0 (none) to 20."""
    return whole_number(name, value, low=0, high=20)


def positive_float(name: str, value: float | str) -> float:
    """A finite number > 0 (a peak, a memory cap, a time budget)."""
    return finite_float(name, value, low=0.0, low_inclusive=False)


def memory_cap_gib(value: float | str, name: str = "--memory-cap") -> float:
    """GiB a CPU search may use: > 0 and at most this machine's RAM (more is no cap: the search would go on until
    the machine swapped or its kernel ended a process)."""
    number = positive_float(name, value)
    import psutil  # off the app's first frame, which needs no memory cap (with subprocess: 0.1 s under load)

    ram_gib = psutil.virtual_memory().total / 1024**3
    if number > ram_gib:
        raise OptionError(f"{name}: {number:g} GiB is more than this machine's {ram_gib:.1f} GiB of RAM; "
                          f"give at most {ram_gib:.1f}")
    return number


def ab_blocks(value: int | str) -> int:
    """Blocks per arm of an A/B comparison (AB_BLOCKS_RANGE)."""
    low, high = AB_BLOCKS_RANGE
    number = whole_number("--blocks", value)
    if number < low:
        raise OptionError(f"--blocks: a comparison needs at least {low} blocks per arm, got {shown(number)} "
                          "(with fewer pairs the signed-rank test can never reach p < 0.05)")
    if number > high:
        said = f"{number:,}" if number < 10**15 else shown(number)
        raise OptionError(f"--blocks: at most {high:,} blocks per arm, got {said} (a time budget is "
                          "what bounds a long comparison)")
    return number


def ab_per_block(value: int | str) -> int:
    """Timed iterations per block of an A/B comparison: 1 .. AB_PER_BLOCK_MAX."""
    return whole_number("--per-block", value, low=1, high=AB_PER_BLOCK_MAX)


def history_path(value: str) -> str:
    """--history: a file the runs are appended to and read from, so it must be a regular file or not exist yet. A
    symbolic link, a folder, a FIFO or a device is refused here, before any run or reading, as every file the app
    writes refuses one (the append refuses it too, for $TORCHPERF_HISTORY and a link put there later); the words
    say "use", as the option is a reader's (history, export) or a writer's (bench)."""
    import stat
    from pathlib import Path

    if not value.strip():
        raise OptionError("--history: empty path")
    if value.strip() == "-":  # as export's --output takes it; a history is a file, never standard input or output
        raise OptionError("--history: '-' is not a file: the history is a file of run records, give its path")
    target = Path(value).expanduser()
    try:
        mode = os.lstat(target).st_mode
    except FileNotFoundError:
        return value
    except OSError as exc:
        raise OptionError(f"--history: cannot use {target}: {exc.strerror or exc}") from None
    if not stat.S_ISREG(mode):
        raise OptionError(f"--history: will not use {target}: it is {file_kind(mode)}, not a regular file")
    return value


def device_name(value: str, name: str = "--device") -> str:
    """A device as typed: auto | cpu | cuda | cuda:N, lower-cased. Only the syntax, without torch (the app's
    process never imports it): whether CUDA is there is said by the device probe (engine.hardware.device_choice.resolve_device
    for the commands)."""
    text = (value or "").strip().lower()
    kind, sep, index = text.partition(":")
    if text in ("auto", "cpu", "cuda") or (kind == "cuda" and sep and index.isdigit() and index.isascii()):
        return text
    raise OptionError(f"{name}: unknown device {shown(value)}: use auto, cpu, cuda or cuda:N")


def port(value: int | str, name: str = "--port") -> int:
    """A TCP port to listen on: 0 (any free port, said when serving) to 65535."""
    return whole_number(name, value, low=0, high=65_535, grouped=False)
