"""A pausable time budget for one execution."""

from __future__ import annotations

import time


class Deadline:
    """A time budget of ``seconds`` that starts running when created and can be paused.

    The executor pauses it while the code waits for a human to approve a call, so that waiting for a
    decision does not count against the code's timeout. Pauses nest: the clock runs again after as
    many :meth:`resume` calls as there were :meth:`pause` calls.

    ``Deadline(30.0)`` → ``pause()`` / ``resume()`` around the wait → ``remaining()``, ``expired``.
    """

    def __init__(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError(f"a deadline needs a non-negative number of seconds, got {seconds!r}")
        self.seconds = float(seconds)
        self._used = 0.0
        self._running_since: float | None = time.monotonic()
        self._pauses = 0

    @property
    def paused(self) -> bool:
        """Whether the clock is stopped."""
        return self._pauses > 0

    def pause(self) -> None:
        """Stop the clock (nestable)."""
        if self._pauses == 0 and self._running_since is not None:
            self._used += time.monotonic() - self._running_since
            self._running_since = None
        self._pauses += 1

    def resume(self) -> None:
        """Undo one :meth:`pause`; the clock runs again when every pause is undone."""
        if self._pauses == 0:
            raise RuntimeError("Deadline.resume() without a matching pause()")
        self._pauses -= 1
        if self._pauses == 0:
            self._running_since = time.monotonic()

    def elapsed(self) -> float:
        """Seconds counted so far (paused time excluded)."""
        if self._running_since is None:
            return self._used
        return self._used + time.monotonic() - self._running_since

    def remaining(self) -> float:
        """Seconds left, never negative."""
        return max(0.0, self.seconds - self.elapsed())

    @property
    def expired(self) -> bool:
        """Whether the budget is used up."""
        return self.elapsed() >= self.seconds

    def __repr__(self) -> str:
        state = "paused" if self.paused else "running"
        return f"Deadline({self.seconds:g}, remaining={self.remaining():.3f}, {state})"


def as_deadline(timeout: float | Deadline | None) -> Deadline | None:
    """Normalise an ``execute(timeout=...)`` argument."""
    if timeout is None or isinstance(timeout, Deadline):
        return timeout
    return Deadline(timeout)
