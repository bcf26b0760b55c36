"""A DDP training step across ranks (engine.measurements.ddp.DdpResult) in words: the heading, the rows (the ranks,
the step, the gradients and DDP's buckets, how the rounds are timed), a row per part of a round, then the exposed
communication, the share hidden (said clamped where it was) and the all-reduce's bus bandwidth; the line as the run
goes. How exposed and hidden are computed is said here once."""

from __future__ import annotations

from torchperf_tui.core.formatting import format_bytes, format_count, format_ms, gbs_text
from torchperf_tui.engine.measurements.collectives import bus_factor
from torchperf_tui.engine.measurements.ddp import FIRST_STEPS, PARTS
from torchperf_tui.wording import WARNING, Row, row
from torchperf_tui.wording.collectives import FACTOR_WORDS, device_words

PART_NAMES = {"compute": "compute alone", "ddp": "DDP step", "allreduce": "all-reduce alone"}
PART_WORDS = {"compute": "the step on the model without DDP: its compute, no communication",
              "ddp": "the step through DDP: each gradient bucket all-reduced as the backward fills it",
              "allreduce": "DDP's buckets all-reduced back to back, with nothing else running"}
PHASE_WORDS = {"first": "untimed first steps", "warmup": "warm-up rounds", "timed": "timed rounds"}
EXPOSED_WORDS = "DDP step - compute alone: the communication the step waited for"
HIDDEN_WORDS = "1 - exposed / all-reduce alone: the share of the communication hidden behind the compute"
ROUND_WORDS = ("a round times each part alone between barriers, every rank at once, in turn; a part's time is the "
               "largest of the ranks' medians (a step ends with its slowest rank)")
# Why DDP can add more than its all-reduce alone: said with a share clamped at 0.
MORE_THAN_ALLREDUCE = ("DDP added more than its all-reduce alone takes: it also copies the gradients into its buckets "
                       "and broadcasts rank 0's buffers (batch norm's statistics) at each forward, and on the CPU gloo "
                       "shares the cores with the compute")
FASTER_THAN_COMPUTE = "the DDP step was quicker than the compute alone: within the noise, nothing exposed"


def part_name(part: str) -> str:
    return PART_NAMES[part]


def ddp_title(result) -> str:
    """'DDP training step of resnet18 across 2 ranks on the CPU (gloo): 8x3x64x64 per rank, float32'."""
    spec = result.spec
    inputs = f": {result.inputs} per rank" if result.inputs else ""
    return (f"DDP training step of {spec.run.model} across {spec.world} ranks on {device_words(spec)}{inputs}, "
            f"{spec.run.dtype}")


def ranks_text(result) -> str:
    """'2, one process each (torch.multiprocessing), on cpu, 1 intra-op thread each'."""
    devices = sorted(set(result.devices))
    where = ", ".join(result.devices) if len(devices) > 1 else devices[0]
    return (f"{result.spec.world}, one process each (torch.multiprocessing), on {where}, {result.threads} intra-op "
            f"thread{'s' if result.threads != 1 else ''} each")


def step_text(result) -> str:
    """'train (sgd): forward, loss (cross-entropy ...), backward, optimizer step; each rank its own batch'."""
    loss = f"loss ({result.loss})" if result.loss else "loss"
    return (f"{result.spec.run.step_spec().describe()}: forward, {loss}, backward, optimizer step; each rank its own "
            "batch, the same weights (DDP makes rank 0's everyone's)")


def gradients_text(result) -> str:
    """'11.7 M parameters, 44.6 MiB of float32 gradients in 3 buckets of 2.0 MiB, 27.5 MiB, 15.1 MiB (DDP's cap
    25.0 MiB)', or with one all-reduce of every gradient where DDP did not say its buckets."""
    grads = f"{format_count(result.parameters)} parameters, {format_bytes(result.gradient_bytes)} of " + (
        f"{result.gradient_dtype} gradients")
    if not result.buckets_from_ddp:
        return f"{grads}; DDP did not say its buckets: the all-reduce alone is one of every gradient"
    sizes = ", ".join(format_bytes(size) for size in result.buckets)
    cap = f" (DDP's cap {format_bytes(result.bucket_cap_bytes)})" if result.bucket_cap_bytes else ""
    count = len(result.buckets)
    return f"{grads} in {count} bucket{'s' if count != 1 else ''} of {sizes}{cap}"


def rounds_text(result) -> str:
    """'20 timed after 5 warm-up, and 3 untimed steps of each first'."""
    run = result.spec.run
    return (f"{run.iters} timed after {run.warmup} warm-up, and {FIRST_STEPS} untimed steps of each first (DDP makes "
            "its buckets)")


def ddp_rows(result) -> list[Row]:
    """The ranks, the step, the gradients and buckets, the rounds, the notes."""
    rows = [row("ranks", ranks_text(result)), row("step", step_text(result))]
    if result.gradient_bytes:
        rows.append(row("gradients", gradients_text(result)))
    rows += [row("rounds", rounds_text(result)), row("timing", ROUND_WORDS)]
    rows += [row("note", note) for note in result.notes]
    return rows


def part_columns() -> list[str]:
    return ["part", "time", "ranks' medians", "what it is"]


def part_cells(result) -> list[list[str]]:
    """A row per part timed: its name, time, each rank's median and what it is."""
    cells = []
    for part in PARTS:
        got = result.parts.get(part)
        if got is None:
            continue
        cells.append([part_name(part), format_ms(got.time_s * 1e3),
                      ", ".join(format_ms(median * 1e3) for median in got.rank_medians_s), PART_WORDS[part]])
    return cells


def hidden_text(result) -> tuple[str, str]:
    """(the share hidden, its level): '63 % of the all-reduce alone', or with the clamp said and its reason."""
    raw, hidden = result.hidden_unclamped, result.hidden
    share = f"{hidden * 100:.0f} % of the all-reduce alone"
    if raw < 0:
        return (f"{share}; clamped from {raw * 100:.0f} %: {MORE_THAN_ALLREDUCE}", WARNING)
    if raw > 1:
        return (f"{share}; clamped from {raw * 100:.0f} %: {FASTER_THAN_COMPUTE}", WARNING)
    return share, ""


def busbw_text(result) -> str:
    """'1.04 GB/s (algbw 1.04 GB/s: 44.6 MiB in 45.1 ms; busbw = algbw x 2(n-1)/n = x 1.00 across 2 ranks)'."""
    world = result.spec.world
    return (f"{gbs_text(result.busbw_gbs)} (algbw {gbs_text(result.algbw_gbs)}: {format_bytes(result.gradient_bytes)} "
            f"in {format_ms(result.time_of('allreduce') * 1e3)}; busbw = algbw x {FACTOR_WORDS['all_reduce']} = "
            f"x {bus_factor('all_reduce', world):.2f} across {world} ranks)")


def outcome_rows(result) -> list[Row]:
    """The exposed communication, the share hidden and the all-reduce's busbw (what the parts timed allow), then
    whether it was cancelled and the time taken."""
    rows: list[Row] = []
    exposed = result.exposed_s
    if exposed is not None:
        step = result.time_of("ddp")
        rows.append(row("exposed", f"{format_ms(exposed * 1e3)}, {exposed / step * 100:.0f} % of the DDP step "
                                   f"({EXPOSED_WORDS})"))
    if result.hidden is not None:
        share, level = hidden_text(result)
        rows.append(row("hidden", share, level))
        rows.append(row("as", HIDDEN_WORDS))
    if result.busbw_gbs is not None:
        rows.append(row("busbw", busbw_text(result)))
    if result.cancelled:
        rows.append(row("stopped", "cancelled: the parts timed before the cancel", WARNING))
    rows.append(row("took", f"{result.seconds:.1f} s (torch {result.torch_version})"))
    return rows


def progress_line(phase: str, done: int, total: int) -> str:
    """'timed rounds 12/20'."""
    return f"{PHASE_WORDS[phase]} {done}/{total}"
