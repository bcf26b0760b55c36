"""What a pane says of its job cancelled before it began: `c` pressed is said as a cancel, a newer measurement that
took the machine as a replacement (a defect fixed: Profile, Kernels and Why said "another measurement replaced it"
for `c` too, and Profile and Why as an error; Throughput and Sweep said "error: cancelled before it started" for
both, and toasted a failure). The jobs are recorded answers held in flight; the rest is real."""

from __future__ import annotations

from tests.app.helpers import real_process, screen_text, shown_notifications, wait_until
from tests.fakes.fake_measurement import HELD, FakeMeasurement, Recorded
from torchperf_tui.app.pane_jobs import REPLACED


def held(fake, kind: str) -> bool:
    return any(info.kind == kind for info in fake.held.values())


# Each pane that starts a measurement of its own, by its key, in an order where each next one replaces the last.
PANES = (("p", "profile"), ("k", "kernels"), ("y", "why"), ("t", "throughput"), ("w", "sweep"))


async def test_c_is_said_as_a_cancel_and_a_newer_measurement_as_a_replacement_in_each_pane_never_as_a_failure(
        tiny_app):
    fake = FakeMeasurement({kind: Recorded(HELD) for _, kind in PANES}, real=real_process())
    async with tiny_app(measurement=fake, size=(120, 40)) as pilot:
        app = pilot.app

        def status(kind: str) -> str:
            return screen_text(app, f"#{kind}-status")

        for key, kind in PANES:
            await pilot.press(key)
            await wait_until(pilot, lambda: held(fake, kind), what=f"the {kind} job in flight")
            await pilot.press("c")
            await wait_until(pilot, lambda: not held(fake, kind) and "cancelled" in status(kind),
                             what=f"the {kind} job's cancel", shown=lambda: status(kind))
            assert "replaced" not in status(kind) and "error" not in status(kind), status(kind)

        await pilot.press(PANES[0][0])
        for (_, kind), (newer_key, newer) in zip(PANES, PANES[1:]):
            await wait_until(pilot, lambda: held(fake, kind), what=f"the {kind} job in flight")
            await pilot.press(newer_key)
            await wait_until(pilot, lambda: status(kind) == REPLACED, what=f"the {kind} job's replacement by {newer}",
                             shown=lambda: status(kind))
        assert app.pane("sweep").error is None
        assert not [shown for shown in shown_notifications(app) if shown.title.endswith("failed")], \
            shown_notifications(app)
