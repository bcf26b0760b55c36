"""A device's measured ceilings (engine.hardware.ceilings.CeilingsResult) in words: the CLI's tables of `ceilings`
and its line in `info`, and the facts the device pane says too (what each ceiling is, a GPU's host-device transfers
or why there are none, when they were measured, how long that took)."""

from __future__ import annotations

import time

from torchperf_tui.core.formatting import compute_rate_text, format_ms


def measured_when(measured_at: float) -> str:
    """'2026-11-26 10:28': when ceilings were measured, in local time."""
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(measured_at))


# A transfer ceiling's workload ('h2d pinned') in words: the direction, then the host memory it is copied from or to.
DIRECTIONS = {"h2d": "host-to-device", "d2h": "device-to-host"}


def transfer_words(workload: str) -> tuple[str, str]:
    """('host-to-device', 'pinned') of a transfer's workload 'h2d pinned'."""
    direction, _, memory = workload.partition(" ")
    return DIRECTIONS.get(direction, direction), memory


def ceiling_kind(ceiling) -> str:
    """'compute', 'copy (read + write)' for the bandwidth ceiling, 'host-to-device, pinned' for a transfer."""
    if ceiling.kind == "transfer":
        return ", ".join(transfer_words(ceiling.workload))
    return "compute" if ceiling.kind == "compute" else "copy (read + write)"


def transfers_text(kept) -> str:
    """A GPU's transfer ceilings in one line: 'host-to-device 24.1 GB/s pinned, 9.8 GB/s pageable · device-to-host
    25.0 GB/s pinned, 7.2 GB/s pageable' ('' without any)."""
    by_direction: dict[str, list[str]] = {}
    for c in getattr(kept, "transfers", None) or ():
        direction, memory = transfer_words(c.workload)
        by_direction.setdefault(direction, []).append(f"{c.text} {memory}")
    return " · ".join(f"{direction} {', '.join(parts)}" for direction, parts in by_direction.items())


def took_text(result) -> str:
    """' in 12.3 s' for ceilings measured now, '' for ones kept from before or of unknown duration."""
    return f" in {result.seconds:.1f} s" if result.seconds is not None and not result.cached else ""


def kept_ceilings_text(kept) -> str:
    """A device's measured ceilings as kept ('float32 conv2d 3x3 0.45 TFLOP/s · copy 12.1 GB/s, measured ...'),
    or how to measure them."""
    if kept is None or not kept.ceilings:
        return "none measured yet: `torchperf-tui ceilings` measures them (seconds) and keeps them"
    parts = [f"{c.dtype} {c.workload} {c.text}" if c.kind == "compute" else f"copy {c.text}" for c in kept.ceilings]
    parts += [text for text in (transfers_text(kept),) if text]
    outdated = f"; {kept.outdated}" if kept.outdated else ""
    return " · ".join(parts) + f" (measured {measured_when(kept.measured_at)}{outdated})"


def ceilings_title(result) -> str:
    """The CLI's heading of `ceilings`: which device, when, and whether measured now or kept."""
    return (f"measured ceilings of {result.device} ({result.key}), {measured_when(result.measured_at)}"
            + (", kept from before (--refresh measures again)" if result.cached else f", measured now{took_text(result)}"))


def ceiling_cells(result) -> list[tuple[str, ...]]:
    """The CLI's table: per ceiling, a GPU's transfers last (ceiling, dtype, best of, size, threads, median,
    reached)."""
    return [(ceiling_kind(c), c.dtype, c.workload, c.size, str(c.threads or "–"), format_ms(c.median_s * 1e3), c.text)
            for c in [*result.ceilings, *(getattr(result, "transfers", None) or ())]]


def tried_cells(result) -> list[tuple[str, ...]]:
    """The CLI's table of every workload tried: (dtype, workload, size, threads, reps, what it reached or why not)."""
    cells = []
    for c in result.ceilings:
        for t in c.tried:
            if t.value is None:
                reached = f"skipped: {t.skipped}"
            else:
                reached = (compute_rate_text(t.value, integer=c.dtype == "int8", digits=3) if c.kind == "compute"
                           else f"{t.value / 1e9:.1f} GB/s")
            cells.append((c.dtype, t.workload, t.size, str(t.threads or "–"), str(t.reps or "–"), reached))
    return cells
