"""The ``execute_code`` invocation in progress, visible to the nested kernel run and its proxies."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass

from ipybox_core.executor import Execution
from ipybox_integrations._session import Executor, RenderedResult, parked_key


@dataclass(frozen=True)
class ParkedCall:
    """Whose execution is parked: the conversation and the outer ``execute_code`` call id."""

    conversation: str
    call_id: str
    nested_call_id: str


@dataclass
class Invocation:
    """One invocation of the ``execute_code`` tool (a fresh call or a resume after a decision)."""

    call_id: str
    conversation: str
    executor: Executor
    execution: Execution | None = None
    waiting_on: str | None = None
    """The key the execution is parked under, if it stopped for an approval."""
    rendered: RenderedResult | None = None
    """The finished execution's text and images."""
    reattached: str | None = None
    """The key of this call's execution picked up from an ipybox service (another process parked it)."""
    service_error: str | None = None
    """Why the service could not be asked for this call's execution, if it could not."""
    learns_tools: bool = False
    """True when the executor does not list its tools in advance: proxies come from the requests."""

    def parked_key(self, nested_call_id: str) -> str:
        """The key of an execution of this conversation parked under a nested proxy call id."""
        return parked_key(self.conversation, canonical_call_id(nested_call_id))


SHOWN_AGAIN = "-again"
"""Suffix of a nested call id that shows a call again (a new call id for the same request)."""


def canonical_call_id(nested_call_id: str) -> str:
    """The nested call id a request was parked under, also for the id it was shown again under."""
    return nested_call_id.removesuffix(SHOWN_AGAIN)


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
