"""Turning an expired deadline into interrupts, and deciding when the kernel ignored them."""

from __future__ import annotations

import time
from collections.abc import Callable

from ipybox_core.kernel.deadline import Deadline

# How often a timed-out execution is interrupted again until it reacts (at most; at least four
# times within the grace period).
_INTERRUPT_REPEAT = 1.0


class TimeoutGuard:
    """Interrupts the code once its deadline expired, and again every second (or quarter of the
    grace period) until it reacts; :meth:`check` says when ``grace`` seconds passed without that.

    Interrupts wait until the code runs: a SIGINT that lands while ipykernel is still dispatching
    the request can make it drop its reply. The grace period starts at expiry either way, so a
    kernel that never gets to the code (stuck in an earlier one) is restarted too.
    """

    def __init__(self, deadline: Deadline | None, grace: float, interrupt: Callable[[], None]) -> None:
        self.deadline = deadline
        self.grace = grace
        self._interrupt = interrupt
        self._repeat = min(_INTERRUPT_REPEAT, grace / 4)
        self._running = False
        self.expired_at: float | None = None
        self._last_interrupt: float | None = None

    @property
    def timed_out(self) -> bool:
        """Whether the deadline expired (the execution ends with a timeout)."""
        return self.expired_at is not None

    def wait_time(self, poll_interval: float) -> float:
        """How long to wait for the next message before checking again."""
        if self.deadline is None or self.timed_out:
            return poll_interval
        return min(poll_interval, self.deadline.remaining())

    def check(self) -> bool:
        """Interrupt if due; True when ``grace`` seconds passed since the deadline expired."""
        if self.deadline is None or not self.deadline.expired:
            return False
        now = time.monotonic()
        if self.expired_at is None:
            self.expired_at = now
        if self._running and (self._last_interrupt is None or now - self._last_interrupt >= self._repeat):
            self._interrupt()
            self._last_interrupt = now
        return now - self.expired_at > self.grace

    def code_started(self) -> None:
        """The kernel began running the code."""
        self._running = True
        self.check()
