"""The ``execute_code`` invocation in progress, visible to the nested kernel run and its proxies."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass

from ipybox_core.approval import ApprovalRequest
from ipybox_core.executor import Execution
from ipybox_integrations._session import Executor, RenderedResult

CALL_PREFIX = "ipybox-"
SHOWN_AGAIN = "-again"
"""Suffix of a nested call id that shows a call again (a new call id for the same request)."""


def nested_call_id(request: ApprovalRequest) -> str:
    """The nested call id of a request: its approval id (over an ipybox service the same in any process)."""
    return f"{CALL_PREFIX}{request.id}"


def canonical_call_id(nested_call_id: str) -> str:
    """The nested call id a request was shown under, also for the id it was shown again under."""
    return nested_call_id.removesuffix(SHOWN_AGAIN)


@dataclass
class Invocation:
    """One invocation of the ``execute_code`` tool (a fresh call or a resume after a decision).

    The execution waits in its executor under the outer ``call_id``; a resume finds it there again
    (``executor.reattach``), from this or any other tool instance.
    """

    call_id: str
    conversation: str
    executor: Executor
    execution: Execution | None = None
    shown: ApprovalRequest | None = None
    """The request this execution stopped at, shown as a nested proxy call."""
    rendered: RenderedResult | None = None
    """The finished execution's text and images."""
    service_error: str | None = None
    """Why the service could not be asked for this call's execution, if it could not."""
    ended: str | None = None
    """The model's words for why nothing waits for this call any more, when nothing does."""
    learns_tools: bool = False
    """True when the executor does not list its tools in advance: proxies come from the requests."""

    def request(self, call_id: str) -> ApprovalRequest | None:
        """The request shown under the nested ``call_id`` (or the id it was shown again under)."""
        shown = self.shown
        if shown is None or canonical_call_id(call_id) != nested_call_id(shown):
            return None
        return shown

    @property
    def waiting(self) -> bool:
        """True while the execution waits for a decision on the request it showed."""
        execution, shown = self.execution, self.shown
        return execution is not None and not execution.done and shown is not None and shown.pending


_current: ContextVar[Invocation | None] = ContextVar("ipybox_openai_agents_invocation", default=None)


@contextlib.contextmanager
def invocation_scope(invocation: Invocation) -> Iterator[Invocation]:
    """Make ``invocation`` the current one for the nested run started inside this block."""
    token = _current.set(invocation)
    try:
        yield invocation
    finally:
        _current.reset(token)


def current_invocation() -> Invocation | None:
    return _current.get()
