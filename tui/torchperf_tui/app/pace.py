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
        # Which request a timer serves: a widget's timer does not call `draw` when it fires but queues the call on
        # the widget, where it may wait behind the message that cancelled it (an A/B's last block line came after
        # its verdict that way); a cancel moves this on, and a queued call of an older one draws nothing.
        self._serial = 0

    def request(self) -> None:
        wait = self._last + self.interval - time.monotonic()
        if wait <= 0:
            self.now()
        elif self._timer is None:
            serial = self._serial
            self._timer = self._owner.set_timer(wait, lambda: self._due(serial))

    def _due(self, serial: int) -> None:
        if serial == self._serial:  # not cancelled since it was asked for
            self.now()

    def now(self) -> None:
        """Draw at once (a new size, a final state), dropping the one pending."""
        self.cancel()
        self._last = time.monotonic()
        self._draw()

    def cancel(self) -> None:
        """Drop the pending draw (one already queued on the widget included): what comes next says something newer."""
        self._serial += 1
        if self._timer is not None:
            self._timer.stop()
            self._timer = None
