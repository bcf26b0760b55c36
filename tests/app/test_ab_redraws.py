"""An A/B's blocks are shown at a pace a person reads, not as fast as they come: each redraw of the Compare table
lays out the screen, and on a 2-core box the app took 0.6 of a core beside a short A/B, which the A/B's own host
check then saw (the attention story's pictures were marked noisy for it)."""

from __future__ import annotations

import time

from tests.app.helpers import flip, screen_text, wait_until
from torchperf_tui.app.pace import Pace
from torchperf_tui.app.widgets.compare.compare_pane import BLOCKS_SHOWN_EVERY_S


class FakeTimer:
    def __init__(self, wait, callback):
        self.wait, self.callback, self.stopped = wait, callback, False

    def stop(self):
        self.stopped = True


class FakeOwner:
    def __init__(self):
        self.timers: list[FakeTimer] = []

    def set_timer(self, wait, callback):
        self.timers.append(FakeTimer(wait, callback))
        return self.timers[-1]


def test_a_pace_draws_at_once_then_once_more_with_the_latest_state_and_a_cancel_drops_the_pending_draw():
    owner, drawn, state = FakeOwner(), [], {"value": 0}
    pace = Pace(owner, lambda: drawn.append(state["value"]), interval=60.0)
    state["value"] = 1
    pace.request()
    assert drawn == [1] and owner.timers == []  # the first comes at once
    for value in (2, 3, 4):  # within the interval: one draw pending, whatever comes meanwhile
        state["value"] = value
        pace.request()
    assert drawn == [1] and len(owner.timers) == 1 and 0 < owner.timers[0].wait <= 60.0
    owner.timers[0].callback()
    assert drawn == [1, 4]  # the latest wins
    state["value"] = 5
    pace.request()
    assert len(owner.timers) == 2
    pace.cancel()
    assert owner.timers[1].stopped and drawn == [1, 4]
    pace.now()  # a final state: at once
    assert drawn == [1, 4, 5]


def test_a_draw_queued_by_its_timer_before_a_cancel_draws_nothing_after_it():
    """A widget's timer queues its call on the widget: the A/B's last block line, queued so, came after the verdict
    that had cancelled it (CI and a stress run saw the verdict wiped). A cancel drops a queued call too."""
    owner, drawn, state = FakeOwner(), [], {"value": 0}
    pace = Pace(owner, lambda: drawn.append(state["value"]), interval=60.0)
    pace.request()
    state["value"] = 1
    pace.request()
    queued = owner.timers[0].callback  # the timer fired: its call waits in the widget's queue
    pace.cancel()  # the verdict's handler ran first
    queued()
    assert drawn == [0]
    pace.request()  # a later request is served again
    owner.timers[-1].callback()
    assert drawn == [0, 1]


async def test_a_fast_ab_redraws_compare_at_its_pace_and_ends_on_its_verdict(tiny_app):
    async with tiny_app(iters=20, warmup=1) as pilot:
        app = pilot.app
        compare = app.pane("compare")
        redraws: list[float] = []
        show_runs = compare.show_runs

        def counted(*args, **kwargs):
            redraws.append(time.monotonic())
            return show_runs(*args, **kwargs)

        compare.show_runs = counted
        await flip(pilot, "mkldnn_enabled")
        await pilot.press("2")
        await wait_until(pilot, lambda: compare.ab_runs is None, what="Compare")  # no A/B yet
        redraws.clear()
        started = time.monotonic()
        await pilot.press("a")
        await wait_until(pilot, lambda: compare.ab_runs is not None and all(r.finished for r in compare.arms()),
                         timeout=120, what="the A/B to end")
        took = time.monotonic() - started
        await wait_until(pilot, lambda: "A/B, 10 interleaved block pairs" in
                         " ".join(screen_text(app, "#compare-verdict").split()), what="the verdict")
        # 20 blocks (10 per arm), in about a second on a quiet box: unpaced, each one redrew the table (22 times)
        assert all(r.total == 20 for r in compare.arms())
        assert len(redraws) <= took / BLOCKS_SHOWN_EVERY_S + 4, (len(redraws), took)
        # a block's line still pending would come after the verdict: wait out the pace and look again
        await pilot.pause(BLOCKS_SHOWN_EVERY_S + 0.2)
        assert "A/B, 10 interleaved block pairs" in " ".join(screen_text(app, "#compare-verdict").split())
