"""Smaller items of issue 21 in the app, driven with Pilot on the CPU: each says what a user would otherwise
meet without a word (identical A/B arms, cancelled empty runs pushing out the baseline, a header and body
that disagree, names cut from the left, toasts that stay over a table)."""

from __future__ import annotations

from tests.app.helpers import screen_text, wait_until


async def test_a_with_identical_arms_says_there_is_nothing_to_compare(tiny_app):
    async with tiny_app(shape="3x16x16", size=(110, 34), warmup=1, iters=6) as pilot:
        app = pilot.app
        await pilot.press("a")  # no flag flipped: A (the defaults) and B (the flags now) are the same
        await wait_until(pilot, lambda: "arms A and B are the same flags" in screen_text(app, "#compare-verdict"),
                         what="the Compare pane to say the arms are the same")
        assert "nothing to compare" in screen_text(app, "#compare-verdict")
        assert app.pane("compare").ab_runs is None and len(app.session.runs) == 0  # nothing was started
