"""Turning an expired deadline into interrupts, and deciding when the kernel ignored them."""

from __future__ import annotations

import time
from collections.abc import Callable

from ipybox_core.kernel.deadline import Deadline

# How often a timed-out execution is interrupted again until it reacts (at most; at least four
# times within the grace period).
_INTERRUPT_REPEAT = 1.0


class TimeoutGuard:
    """Interrupts the code once its deadline expired, again every second (or quarter of the grace
    period), and right when the code starts running (an interrupt that lands before that is lost);
    :meth:`check` reports when the kernel did not react within ``grace`` seconds."""

    def __init__(self, deadline: Deadline | None, grace: float, interrupt: Callable[[], None]) -> None:
        self.deadline = deadline
        self.grace = grace
        self._interrupt = interrupt
        self._repeat = min(_INTERRUPT_REPEAT, grace / 4)
        self.interrupted_at: float | None = None
        self._last_interrupt = 0.0

    @property
    def interrupted(self) -> bool:
        """Whether the deadline expired and the code was interrupted for it."""
        return self.interrupted_at is not None

    def wait_time(self, poll_interval: float) -> float:
        """How long to wait for the next message before checking again."""
        if self.deadline is None or self.interrupted:
            return poll_interval
        return min(poll_interval, self.deadline.remaining())

    def check(self) -> bool:
        """Interrupt if due; True when the grace period after the first interrupt is over."""
        if self.deadline is None or not self.deadline.expired:
            return False
        now = time.monotonic()
        if self.interrupted_at is None:
            self.interrupted_at = now
        if now - self._last_interrupt >= self._repeat:
            self._interrupt()
            self._last_interrupt = now
        return now - self.interrupted_at > self.grace

    def code_started(self) -> None:
        """The kernel began running the code (``execute_input``)."""
        if self.interrupted:
            self._interrupt()
