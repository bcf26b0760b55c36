"""What a rank runs in place of measure_rank, for the tests of a rank that fails or stalls: importable by name in
the ranks' own processes (spawned: they import it again)."""

from __future__ import annotations

import time

from torchperf_tui.engine.measurements.collectives import measure_rank


def failing_rank(rank, spec, store, events, timeout_s):
    """Rank 1 raises before it joins the group; the others wait for it there."""
    if rank == 1:
        raise RuntimeError("planted failure\nwith a second line that must not be said")
    measure_rank(rank, spec, store, events, timeout_s)


def stalling_rank(rank, spec, store, events, timeout_s):
    """Rank 1 joins the group, then says nothing more, for ever; rank 0 measures, and waits for it in its first
    collective."""
    if rank != 1:
        measure_rank(rank, spec, store, events, timeout_s)
        return
    import torch.distributed as dist  # the rank's own process: torch is there to be imported

    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=spec.world)
    events.put(("ready", rank))
    time.sleep(3600)
