"""A pausable time budget for one execution."""

from __future__ import annotations

import time


class Deadline:
    """A time budget of ``seconds`` that starts running when created and can be paused.

    The executor pauses it while the code waits for a human to approve a call, so that waiting for a
    decision does not count against the code's timeout. Pauses nest: the clock runs again after as
    many :meth:`resume` calls as there were :meth:`pause` calls.

    ``Deadline(30.0)`` → ``pause()`` / ``resume()`` around the wait → ``remaining()``, ``expired``.

    ``wall_seconds`` adds a wall-clock cap that never pauses: the budget expires when either runs
    out (``Deadline(math.inf, wall_seconds=600)`` is a pure wall-clock limit).
    """

    def __init__(self, seconds: float, *, wall_seconds: float | None = None) -> None:
        if seconds < 0 or (wall_seconds is not None and wall_seconds < 0):
            raise ValueError(
                f"a deadline needs a non-negative number of seconds, got {seconds!r}, {wall_seconds!r}"
            )
        self.seconds = float(seconds)
        self.wall_seconds = None if wall_seconds is None else float(wall_seconds)
        self._started = time.monotonic()
        self._used = 0.0
        self._running_since: float | None = self._started
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
        left = self.seconds - self.elapsed()
        if self.wall_seconds is not None:
            left = min(left, self.wall_seconds - (time.monotonic() - self._started))
        return max(0.0, left)

    @property
    def wall_expired(self) -> bool:
        """Whether the wall-clock cap (if any) is used up."""
        return self.wall_seconds is not None and time.monotonic() - self._started >= self.wall_seconds

    @property
    def expired(self) -> bool:
        """Whether the budget is used up."""
        return self.elapsed() >= self.seconds or self.wall_expired

    @property
    def limit(self) -> float:
        """The seconds of the limit that ran out (the wall-clock cap if it did, else the budget)."""
        if self.wall_seconds is not None and self.wall_expired and self.elapsed() < self.seconds:
            return self.wall_seconds
        return self.seconds

    def describe(self) -> str:
        """What ran out, for error messages: ``"30 s timeout"`` or ``"600 s wall-clock limit"``."""
        if self.wall_expired and not self.elapsed() >= self.seconds:
            return f"{self.wall_seconds:g} s wall-clock limit (time waiting for approval included)"
        return f"{self.seconds:g} s timeout"

    def __repr__(self) -> str:
        state = "paused" if self.paused else "running"
        return f"Deadline({self.seconds:g}, remaining={self.remaining():.3f}, {state})"


def as_deadline(timeout: float | Deadline | None) -> Deadline | None:
    """Normalise an ``execute(timeout=...)`` argument."""
    if timeout is None or isinstance(timeout, Deadline):
        return timeout
    return Deadline(timeout)
