"""What a pane says of its job cancelled before it began: `c` pressed is said as a cancel, a newer measurement that
took the machine as a replacement (a defect fixed: Profile, Kernels and Why said "another measurement replaced it"
for `c` too, and Profile and Why as an error). The jobs are recorded answers held in flight; the rest is real."""

from __future__ import annotations

from tests.app.helpers import choose_model, screen_text, wait_ready, wait_until
from tests.app.test_picker_sources import sources_app
from tests.fakes.fake_measurement import HELD, Recorded


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
        assert not [shown for shown in app.__dict__.get("_shown_notifications", [])
                    if shown.title in ("profile failed", "why failed")]
