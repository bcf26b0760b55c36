"""What a pane says of its job cancelled before it began: `c` pressed is said as a cancel, a newer measurement that
took the machine as a replacement (a defect fixed: Profile, Kernels and Why said "another measurement replaced it"
for `c` too, and Profile and Why as an error; Throughput and Sweep said "error: cancelled before it started" for
both). The jobs are recorded answers held in flight; the rest is real."""

from __future__ import annotations

from tests.app.helpers import choose_model, real_process, screen_text, shown_notifications, wait_ready, wait_until
from tests.app.test_picker_sources import sources_app
from tests.fakes.fake_measurement import HELD, FakeMeasurement, Recorded


def held(fake, kind: str) -> bool:
    return any(info.kind == kind for info in fake.held.values())


async def test_c_is_said_as_a_cancel_and_a_newer_run_as_a_replacement():
    app, fake = sources_app(answers={"profile": Recorded(HELD), "why": Recorded(HELD)}, warmup=1, iters=5)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_ready(pilot)
        await choose_model(pilot, "resnet18", "3x64x64")

        await pilot.press("p")
        await wait_until(pilot, lambda: held(fake, "profile"), what="the profile in flight")
        await pilot.press("c")
        await wait_until(pilot, lambda: not held(fake, "profile")
                         and "cancelled" in screen_text(app, "#profile-status"),
                         what="the profile's cancel", shown=lambda: screen_text(app, "#profile-status"))
        status = screen_text(app, "#profile-status")
        assert "replaced" not in status and "error" not in status, status

        await pilot.press("y")
        await wait_until(pilot, lambda: held(fake, "why"), what="the why in flight")
        await pilot.press("r")
        await wait_until(pilot, lambda: "replaced" in screen_text(app, "#why-status"),
                         what="the why's replacement", shown=lambda: screen_text(app, "#why-status"))
        assert screen_text(app, "#why-status") == "cancelled: another measurement replaced it"
        assert not [shown for shown in shown_notifications(app) if shown.title in ("profile failed", "why failed")]


async def test_throughput_and_sweep_say_a_cancel_as_the_other_panes_do_and_never_as_a_failure(tiny_app):
    """A defect fixed: Throughput and Sweep said "error: cancelled before it started" and toasted "failed" for a job
    cancelled before it began, whether `c` cancelled it or a newer measurement replaced it."""
    fake = FakeMeasurement({"throughput": Recorded(HELD), "sweep": Recorded(HELD)}, real=real_process())
    async with tiny_app(measurement=fake, size=(120, 40)) as pilot:
        app = pilot.app
        await pilot.press("t")
        await wait_until(pilot, lambda: held(fake, "throughput"), what="the search in flight")
        await pilot.press("c")
        await wait_until(pilot, lambda: "cancelled" in screen_text(app, "#throughput-status"),
                         what="the search's cancel", shown=lambda: screen_text(app, "#throughput-status"))
        status = screen_text(app, "#throughput-status")
        assert "replaced" not in status and "error" not in status, status

        await pilot.press("w")
        await wait_until(pilot, lambda: held(fake, "sweep"), what="the sweep in flight")
        await pilot.press("t")
        await wait_until(pilot, lambda: "replaced" in screen_text(app, "#sweep-status"),
                         what="the sweep's replacement", shown=lambda: screen_text(app, "#sweep-status"))
        assert screen_text(app, "#sweep-status") == "cancelled: another measurement replaced it"
        assert app.pane("sweep").error is None
        assert not [shown for shown in shown_notifications(app) if shown.title in ("throughput failed", "sweep failed")]
