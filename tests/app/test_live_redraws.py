"""How often a live run redraws: its lines at most every LIVE_STATS_EVERY_S, and a CPU run's histogram at most every
LIVE_CPU_HISTOGRAM_EVERY_S (its model shares the cores with the app: bench/results/tui_fidelity.txt), the last
timed batch's always."""

from __future__ import annotations

from types import SimpleNamespace

from torchperf_tui.app.runs import LiveRun
from torchperf_tui.app.widgets.timing import run_lines
from torchperf_tui.app.widgets.timing.run_lines import LIVE_CPU_HISTOGRAM_EVERY_S, histogram_due


def batch(index: int, total: int = 64, phase: str = "timed"):
    return SimpleNamespace(phase=phase, index=index, total=total)


def run_on(device: str) -> LiveRun:
    return LiveRun(run_id=1, model="m", device=device, flags=None, flags_text="defaults")


def test_a_cpu_runs_histogram_is_drawn_at_most_every_interval_and_at_its_last_batch(monkeypatch):
    clock = [100.0]
    monkeypatch.setattr(run_lines.time, "monotonic", lambda: clock[0])
    run = run_on("cpu")
    assert histogram_due(run, batch(3))  # the first timed batch draws it
    clock[0] = 100.5
    assert not histogram_due(run, batch(10))  # the lines redraw, the histogram waits
    clock[0] = 100.0 + LIVE_CPU_HISTOGRAM_EVERY_S - 0.1
    assert not histogram_due(run, batch(20))
    clock[0] = 100.0 + LIVE_CPU_HISTOGRAM_EVERY_S
    assert histogram_due(run, batch(30))
    assert not histogram_due(run, batch(31))  # counted from that draw
    assert histogram_due(run, batch(63))  # the last timed batch: the whole run, at once
    assert histogram_due(run, batch(5, phase="warmup"))  # not a timed batch: its own view of the phase


def test_a_gpu_runs_histogram_is_drawn_at_each_redraw(monkeypatch):
    monkeypatch.setattr(run_lines.time, "monotonic", lambda: 100.0)
    run = run_on("cuda:0")
    assert all(histogram_due(run, batch(i)) for i in (3, 10, 20))
