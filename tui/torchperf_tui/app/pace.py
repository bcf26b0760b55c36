"""Redraws paced for data that arrives faster than a person reads it: the UI shares the box's cores with the run it
shows, and each redraw of a plot or a table (its layout) costs milliseconds of them."""

from __future__ import annotations

import time
from typing import Callable


class Pace:
    """Call `draw` at once, or once `interval` seconds have passed since it last ran: never more than one call
    pending, and the state at that moment is what it draws (the latest wins)."""

    def __init__(self, owner, draw: Callable[[], None], interval: float) -> None:
        self._owner = owner  # the widget whose timer waits (its timers stop with it)
        self._draw = draw
        self.interval = interval
        self._last = 0.0
        self._timer = None

    def request(self) -> None:
        wait = self._last + self.interval - time.monotonic()
        if wait <= 0:
            self.now()
        elif self._timer is None:
            self._timer = self._owner.set_timer(wait, self.now)

    def now(self) -> None:
        """Draw at once (a new size, a final state), dropping the one pending."""
        self.cancel()
        self._last = time.monotonic()
        self._draw()

    def cancel(self) -> None:
        """Drop the pending draw: what comes next says something newer."""
        if self._timer is not None:
            self._timer.stop()
            self._timer = None
