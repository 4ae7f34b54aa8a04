"""What the model must read before its next ``execute_code`` result: a restart notice, a call the
conversation moved on from.

A note waits under its key (a conversation, or one call of it) until a result carries it; a call
that suspends instead of returning puts back the notes it took, to come first in the next result.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

from ipybox_core.executor.contract import Session

K = TypeVar("K", bound=Hashable)


def restart_notes(session: Session) -> list[str]:
    """``session``'s restart notice (its kernel was restarted meanwhile), taken once, as notes."""
    notice = session.take_restart_notice()
    return [notice] if notice else []


class Notes(Generic[K]):
    """The notes not read yet, by key."""

    def __init__(self) -> None:
        self._notes: dict[K, list[str]] = {}

    def take(self, key: K, session: Session | None = None) -> list[str]:
        """The notes of ``key``, now taken; ``session``'s restart notice first."""
        restart = restart_notes(session) if session is not None else []
        return [*restart, *self._notes.pop(key, [])]

    def put_back(self, key: K, notes: list[str]) -> None:
        """``notes`` were taken but not read (the call suspended): they come first next time."""
        if notes:
            self._notes.setdefault(key, [])[:0] = notes

    def add(self, key: K, note: str) -> None:
        """``note`` is to be read after the notes ``key`` has."""
        self._notes.setdefault(key, []).append(note)

    def peek(self, key: K) -> list[str]:
        """The notes of ``key`` not read yet (they stay)."""
        return list(self._notes.get(key, ()))

    def forget(self, where: Callable[[K], bool]) -> None:
        """Drop the notes of every key ``where`` takes."""
        for key in [key for key in self._notes if where(key)]:
            del self._notes[key]
