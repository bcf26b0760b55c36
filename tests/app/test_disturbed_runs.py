"""A run the app disturbed is marked: a window resized during a timed run says so in the Timing pane, in its
history record and in every comparison with it (Compare and History); a run without a resize is not marked so."""

from __future__ import annotations

import json
import os

from tests.app.helpers import flip, screen_text, wait_until
from tests.app.test_history_pane import two_runs_compared
from tests.records import make_record
from torchperf_tui.app.runs import Disturbances, LiveRun, busy_mark
from torchperf_tui.app.widgets.compare.compare_pane import disturbed_note
from torchperf_tui.engine.records.history_compare import compare_records

SLOW = "tests.tinymodels:per_call_cost"  # 10 ms a call: 300 timed iterations take 3 s, time to resize in
RESIZED = "window resized during the run"


def history_lines() -> list[dict]:
    path = os.environ["TORCHPERF_HISTORY"]  # tests/conftest.py: each test's own history file
    if not os.path.exists(path):
        return []
    with open(path) as file:
        return [json.loads(line) for line in file if line.strip()]


async def timed_run(pilot, run_id: int, resize_to: tuple[int, int] | None = None):
    """Press r, wait for the UI to see run `run_id`'s timed samples (resizing then, if asked), then its end."""
    app = pilot.app
    await pilot.press("r")

    def timing() -> bool:
        record = app.session.runs.get(run_id)
        return record is not None and (record.status == "timed" or record.finished)

    await wait_until(pilot, timing, what=f"run #{run_id}'s timed iterations")
    assert not app.session.runs.get(run_id).finished, "the run ended before the resize: too fast to test"
    if resize_to is not None:
        await pilot.resize_terminal(*resize_to)
    await wait_until(pilot, lambda: app.session.runs.get(run_id).finished, timeout=180, what=f"run #{run_id} to end")
    return app.session.runs.get(run_id)


async def test_a_resize_during_a_run_marks_it_on_screen_in_history_and_in_compare(tiny_app):
    async with tiny_app(spec=SLOW, shape="3x16x16", iters=300) as pilot:
        app = pilot.app
        first = await timed_run(pilot, 1, resize_to=(100, 32))
        assert first.status == "done" and RESIZED in first.disturbed
        await wait_until(pilot, lambda: "disturbed:" in screen_text(app, "#run-stats"), what="the mark on screen")
        assert RESIZED in screen_text(app, "#run-stats")
        await wait_until(pilot, lambda: len(history_lines()) == 1, what="the run's history record")
        assert RESIZED in history_lines()[0]["disturbed"]

        second = await timed_run(pilot, 2)  # the same model, no resize
        assert second.status == "done" and RESIZED not in second.disturbed
        await wait_until(pilot, lambda: len(history_lines()) == 2, what="the second run's history record")
        assert RESIZED not in history_lines()[1].get("disturbed", [])

        await pilot.press("2")  # Compare: run #1 is the baseline of #2's speed-up
        await wait_until(pilot, lambda: "was disturbed" in screen_text(app, "#compare-note") or
                         "were disturbed" in screen_text(app, "#compare-note"), what="the Compare note")
        note = screen_text(app, "#compare-note")
        assert f"#1 was disturbed ({RESIZED}" in note and "may be the disturbance" in note


async def test_a_resize_during_an_ab_comparison_marks_both_arms_its_verdict_and_their_history_records(tiny_app):
    # 100 iterations: 20 blocks of 20 timed calls of 10 ms per arm, about 5 s of blocks to resize in
    async with tiny_app(spec=SLOW, shape="3x16x16", iters=100, warmup=1) as pilot:
        app = pilot.app
        await flip(pilot, "mkldnn_enabled")  # A: the flags before the flip, B: the flags now
        await pilot.press("a")
        compare = app.pane("compare")

        def arms() -> list:
            return compare.arms() if compare.ab_runs is not None else []

        await wait_until(pilot, lambda: any(r.status == "timed" or r.finished for r in arms()),
                         what="the A/B's first block")
        assert not any(r.finished for r in arms()), "the A/B ended before the resize: too fast to test"
        await pilot.resize_terminal(100, 32)
        await wait_until(pilot, lambda: len(arms()) == 2 and all(r.finished for r in arms()), timeout=180,
                         what="the A/B to end")
        assert [r.status for r in arms()] == ["done", "done"]
        assert all(RESIZED in r.disturbed for r in arms())
        await wait_until(pilot, lambda: "the comparison was disturbed" in screen_text(app, "#compare-verdict"),
                         what="the mark in the verdict", shown=lambda: screen_text(app, "#compare-verdict"))
        assert f"the comparison was disturbed ({RESIZED}" in " ".join(screen_text(app, "#compare-verdict").split())
        await wait_until(pilot, lambda: len(history_lines()) == 2, what="the arms' history records")
        assert all(RESIZED in line["disturbed"] and line["kind"] == "ab" for line in history_lines())


async def test_a_disturbed_record_is_marked_in_history_and_its_comparison_says_so(tmp_path):
    path = tmp_path / "h.jsonl"
    clean, shaken = make_record(p50=10.0), make_record(p50=18.0)
    shaken.disturbed = [RESIZED]
    flags, comparison = await two_runs_compared(path, clean, shaken, says="was disturbed")
    assert flags[shaken.short_id].endswith("(disturbed)") and "disturbed" not in flags[clean.short_id]
    assert f"{shaken.short_id} was disturbed ({RESIZED})" in comparison


def test_disturbances_count_what_happened_within_a_run_and_ignore_the_first_size():
    now = [0.0]
    log = Disturbances(clock=lambda: now[0])
    log.resized((110, 34))  # the terminal's first size: not a resize
    log.resized((110, 34))  # the same size again: not one either
    now[0] = 5.0
    log.resized((100, 32))
    now[0] = 6.0
    log.resized((90, 30))
    now[0] = 20.0
    log.resized((80, 24))
    assert log.between(4.0, 10.0) == ["window resized 2 times during the run"]
    assert log.between(5.5, 10.0) == [RESIZED]
    assert log.between(7.0, 19.0) == []


def test_the_app_busy_for_half_a_core_over_a_run_marks_it():
    assert busy_mark(0.3, 10.0) is None  # 3 % of a core: the app idling, redrawing twice a second
    assert busy_mark(6.2, 10.0) == ("the app was busy during the run: its process used 0.62 of a core (redraws, its "
                                    "own jobs)")
    # As on the H200's box of 16 cores: a GPU run beside the app's 0.63 of a core, with 14 cores idle, is not marked;
    # on a 2-core box with less than a core idle it is.
    assert busy_mark(6.3, 10.0, core_to_spare=True) is None
    assert busy_mark(6.3, 10.0, core_to_spare=False) is not None


def test_compare_says_a_disturbed_run_in_the_words_of_a_comparison_of_history_records():
    """One sentence for one fact: the Compare note and History's comparison word a disturbed run alike."""
    kept = [LiveRun(run_id=n, model="m", device="cpu", flags=None, flags_text="", status="done") for n in (1, 2)]
    assert disturbed_note(kept) == ""
    kept[0].disturbed = [RESIZED]
    shaken = make_record(p50=18.0)
    shaken.disturbed = [RESIZED]
    in_history = compare_records(make_record(p50=10.0), shaken).disturbance_note
    said = in_history.replace(shaken.short_id, "#1").replace("the ratio", "the speed-up")
    assert disturbed_note(kept) == f"\n[$warning]{said}[/]"
