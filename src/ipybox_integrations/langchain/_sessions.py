"""Suspended ``execute_code`` runs, kept between LangGraph runs by (thread, tool call).

An interrupt ends the graph run but not the code: the kernel waits inside the MCP call. The
execution is kept here, per executor (so an agent rebuilt around the same executor and checkpointer
resumes it), until the tool call is re-entered with the answer.
"""

from __future__ import annotations

import contextlib
import time
import weakref
from dataclasses import dataclass, field

from ipybox_core.approval import ApprovalRequest
from ipybox_core.executor import CodeExecutor, Execution


@dataclass(eq=False)
class Session:
    """One ``execute_code`` call whose execution lives across graph runs."""

    thread_id: str
    tool_call_id: str
    execution: Execution
    abandon_after: float | None
    answered: int = 0
    """How many of this call's interrupts LangGraph has answered (replayed on every re-entry)."""
    pending: ApprovalRequest | None = None
    """The approval request the execution waits on, once it was put to the human."""
    surfaced: int | None = None
    """Index of the last interrupt shown to the human (only an answer to a shown question counts)."""
    active_at: float = field(default_factory=time.monotonic)

    @property
    def expired(self) -> bool:
        idle = time.monotonic() - self.active_at
        return self.abandon_after is not None and idle > self.abandon_after


class SessionStore:
    """The suspended sessions of one executor."""

    def __init__(self) -> None:
        self._sessions: dict[tuple[str, str], Session] = {}

    def get(self, thread_id: str, tool_call_id: str) -> Session | None:
        return self._sessions.get((thread_id, tool_call_id))

    def add(self, session: Session) -> None:
        self._sessions[(session.thread_id, session.tool_call_id)] = session

    def discard(self, session: Session) -> None:
        key = (session.thread_id, session.tool_call_id)
        if self._sessions.get(key) is session:
            del self._sessions[key]

    def of_thread(self, thread_id: str) -> list[Session]:
        return [session for (thread, _), session in self._sessions.items() if thread == thread_id]

    async def cancel(self, session: Session, reason: str) -> None:
        """Forget ``session`` and stop its code (pending approvals are rejected with ``reason``)."""
        self.discard(session)
        if not session.execution.done:
            with contextlib.suppress(Exception):
                await session.execution.cancel(reason)

    async def cancel_thread(self, thread_id: str, reason: str) -> int:
        """Cancel every session of ``thread_id``; returns how many there were."""
        sessions = self.of_thread(thread_id)
        for session in sessions:
            await self.cancel(session, reason)
        return len(sessions)

    async def sweep(self) -> None:
        """Cancel and forget sessions idle longer than their ``abandon_after``.

        A session whose code finished meanwhile (its approval request expired, say) is kept until then:
        the answer that resumes it still collects the result.
        """
        for session in list(self._sessions.values()):
            if session.expired:
                await self.cancel(session, "the approval request was not answered in time")


_STORES: weakref.WeakKeyDictionary[CodeExecutor, SessionStore] = weakref.WeakKeyDictionary()


def sessions_of(executor: CodeExecutor) -> SessionStore:
    """The session store of ``executor`` (shared by every tool and middleware built on it)."""
    store = _STORES.get(executor)
    if store is None:
        store = _STORES[executor] = SessionStore()
    return store


async def cancel_suspended(
    executor: CodeExecutor, thread_id: str, reason: str = "cancelled by the application"
) -> int:
    """Cancel the executions of ``thread_id`` that wait for an approval; returns how many there were.

    :class:`CodeActionMiddleware` does this itself when new input arrives on a thread; call it in a
    hand-built graph when a user leaves a pending approval unanswered and moves on.
    """
    return await sessions_of(executor).cancel_thread(thread_id, reason)
