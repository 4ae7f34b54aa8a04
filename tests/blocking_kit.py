"""Helpers for tests that plant FIFOs where the application touches a path: nothing may block."""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable
from pathlib import Path

BOUND = 20.0
"""Seconds after which an operation that has not returned is taken to block (it would forever)."""


def bounded(action: Callable[[], object]) -> BaseException | None:
    """Run ``action`` in a thread; fail if it does not return (it blocked); its exception or None."""
    outcome: list[BaseException | None] = []

    def target() -> None:
        try:
            action()
            outcome.append(None)
        except BaseException as exc:
            outcome.append(exc)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(BOUND)
    assert not thread.is_alive(), "the operation blocked"
    return outcome[0]


def blocks_on_fifo(fifo: Path, action: Callable[[], object]) -> bool:
    """Control: whether ``action`` blocks on ``fifo`` (released afterwards by opening the other end)."""
    thread = threading.Thread(target=lambda: bounded_quietly(action), daemon=True)
    thread.start()
    thread.join(1.0)
    blocked = thread.is_alive()
    for flags in (os.O_RDONLY | os.O_NONBLOCK, os.O_WRONLY | os.O_NONBLOCK):
        with contextlib.suppress(OSError):
            os.close(os.open(fifo, flags))
    thread.join(BOUND)
    return blocked


def bounded_quietly(action: Callable[[], object]) -> None:
    with contextlib.suppress(OSError):
        action()
