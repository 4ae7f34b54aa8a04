"""Suspended ``execute_code`` runs, kept between LangGraph runs by (thread, tool call).

An interrupt ends the graph run but not the code: the kernel waits inside the MCP call. The
execution is parked in the :class:`~ipybox_core.suspended.SuspendedExecutions` of what the tool was
given (one per executor or ``Sessions``, so an agent rebuilt around the same one and checkpointer
resumes it) from the start of the call until it returns; the abandonment timer runs only while a
question waits for its answer.
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from langgraph.config import get_config

from ipybox_core.suspended import SuspendedExecution, SuspendedExecutions
from ipybox_integrations._session import SessionSource, cancel_waiting

CANCELLED_REASON = "cancelled by the application"
EXPIRED_REASON = "the approval request was not answered in time"


@dataclass(eq=False)
class CallState:
    """What LangGraph's replays of one ``execute_code`` call need to stay aligned."""

    thread_id: str
    tool_call_id: str
    answered: int = 0
    """How many of this call's interrupts LangGraph has answered (replayed on every re-entry)."""
    surfaced: int | None = None
    """Index of the last interrupt shown to the human (only an answer to a shown question counts)."""
    notes: list[str] = field(default_factory=list)
    """What the model must read before the result (a restart notice), across the call's re-entries."""


Parked = SuspendedExecution[CallState]
"""One ``execute_code`` call whose execution lives across graph runs (``request``: the open question)."""
Store = SuspendedExecutions[CallState]

_STORES: weakref.WeakKeyDictionary[SessionSource, Store] = weakref.WeakKeyDictionary()


def suspended_of(source: SessionSource) -> Store:
    """The suspended calls of ``source`` (shared by every tool and middleware built on it)."""
    store = _STORES.get(source)
    if store is None:
        store = _STORES[source] = SuspendedExecutions(abandon_after=None, abandon_reason=EXPIRED_REASON)
    return store


def thread_of(config: Mapping[str, Any] | None = None) -> str:
    """The LangGraph ``thread_id`` of ``config`` (default: the running graph's), ``""`` if none."""
    if config is None:
        try:
            config = get_config()
        except RuntimeError:  # not inside a graph
            return ""
    return str(config.get("configurable", {}).get("thread_id") or "")


def of_thread(store: Store, thread_id: str) -> list[Parked]:
    return [parked for parked in store.values() if parked.context.thread_id == thread_id]


def discard(store: Store, parked: Parked) -> None:
    """Forget ``parked`` unless something else was parked under its key meanwhile."""
    if store.get(parked.key) is parked:
        store.take(parked.key)


async def cancel_suspended(
    executor: SessionSource, *, thread_id: str | None = None, reason: str | None = None
) -> int:
    """Cancel the executions that wait for an approval (of ``thread_id``, or all); returns how many.

    :class:`CodeActionMiddleware` does this itself when new input arrives on a thread; call it in a
    hand-built graph when a user leaves a pending approval unanswered and moves on. With a
    ``thread_id``, what waits in the thread's executor is cancelled too, whichever tool instance
    (with ``RemoteSessions``: whichever process) started it.
    """
    cancelled = await suspended_of(executor).cancel_all(
        reason or CANCELLED_REASON,
        where=None if thread_id is None else lambda parked: parked.context.thread_id == thread_id,
    )
    if thread_id:
        cancelled += await cancel_waiting(executor, thread_id, reason=reason or CANCELLED_REASON)
    return cancelled
