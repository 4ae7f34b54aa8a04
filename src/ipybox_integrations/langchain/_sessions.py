"""The thread an ``execute_code`` call belongs to, and cancelling what a thread left waiting.

An interrupt ends the graph run but not the code: the kernel waits inside the MCP call, and the
execution waits in its executor under the thread's tool call id (over ``RemoteSessions``: in the
ipybox service), where every entry of the tool finds it again (``executor.reattach``). Nothing
here keeps executions; a tool only remembers which calls it left waiting (``WaitingCalls``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from langgraph.config import get_config

from ipybox_integrations._session import SessionSource, cancel_waiting

CANCELLED_REASON = "cancelled by the application"


def thread_of(config: Mapping[str, Any] | None = None) -> str:
    """The LangGraph ``thread_id`` of ``config`` (default: the running graph's), ``""`` if none."""
    if config is None:
        try:
            config = get_config()
        except RuntimeError:  # not inside a graph
            return ""
    return str(config.get("configurable", {}).get("thread_id") or "")


async def cancel_suspended(executor: SessionSource, *, thread_id: str, reason: str | None = None) -> int:
    """Cancel the execution of ``thread_id`` that waits for an approval; returns how many (0 or 1).

    :class:`CodeActionMiddleware` does this itself when new input arrives on a thread; call it in a
    hand-built graph when a user leaves a pending approval unanswered and moves on. What waits in
    the thread's executor is cancelled whichever tool instance (with ``RemoteSessions``: whichever
    process) started it.
    """
    return await cancel_waiting(executor, thread_id, reason=reason or CANCELLED_REASON)
