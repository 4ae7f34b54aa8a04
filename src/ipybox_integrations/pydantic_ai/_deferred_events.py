"""PydanticAI's documented deferred-call events for the calls the code makes.

A native deferred tool puts ``DeferredToolRequestsEvent`` into the run's event stream before the
run's handler capabilities are asked, and ``DeferredToolResultsEvent`` with the handler's answer
once one answered. A held call of the code is decided inside ``execute_code``, where a tool can
only emit capability events: it emits :class:`HeldRequests` / :class:`HeldResults` (carrying what
PydanticAI's own call path hands the handlers and gets back), and ``CodeAction``'s stream wrapper
(:func:`documented_events`) puts the documented events in their place. A deferred run's own
``DeferredToolRequestsEvent`` names the MCP call it holds, as the run's output does.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator, AsyncIterable
from dataclasses import dataclass
from typing import Any

from pydantic_ai import (
    AgentStreamEvent,
    DeferredToolRequests,
    DeferredToolRequestsEvent,
    DeferredToolResults,
    DeferredToolResultsEvent,
    RunContext,
)
from pydantic_ai.capabilities import AbstractCapability, CombinedCapability, WrapperCapability
from pydantic_ai.exceptions import UserError
from pydantic_ai.messages import CapabilityEvent

from ipybox_integrations.pydantic_ai.approvals import named_requests


@dataclass(kw_only=True)
class HeldRequests(CapabilityEvent, namespace="ipybox", name="held_call_requests"):
    """A held call of the code about to be put to the run's handlers (becomes a
    ``DeferredToolRequestsEvent``)."""

    requests: DeferredToolRequests


@dataclass(kw_only=True)
class HeldResults(CapabilityEvent, namespace="ipybox", name="held_call_results"):
    """A handler's answer to a held call of the code (becomes ``DeferredToolResultsEvent``)."""

    results: DeferredToolResults


def answers_inline(capability: AbstractCapability[Any] | None) -> bool:
    """Whether some capability of the run may decide a deferred call inline (implements
    ``handle_deferred_tool_calls``). Without one, the held call defers the run and PydanticAI's own
    ``DeferredToolRequestsEvent`` of the ``execute_code`` call announces it instead."""
    if capability is None:
        return False
    if isinstance(capability, CombinedCapability):
        return any(answers_inline(child) for child in capability.capabilities)
    if (
        isinstance(capability, WrapperCapability)
        and type(capability).handle_deferred_tool_calls is WrapperCapability.handle_deferred_tool_calls
    ):
        return answers_inline(capability.wrapped)
    return type(capability).handle_deferred_tool_calls is not AbstractCapability.handle_deferred_tool_calls


def announcing(ctx: RunContext[Any], root: AbstractCapability[Any] | None) -> dict[str, Any]:
    """``ToolManager.handle_call`` callbacks (for a manager with the ``root`` capability) that put
    a held call's request and its inline answer into the run's event stream, as a run does for a
    native deferred tool."""
    if not answers_inline(root):
        return {}

    async def on_deferred_requests(requests: DeferredToolRequests) -> None:
        await emit(ctx, HeldRequests(requests=requests))

    async def on_inline_deferred(requests: DeferredToolRequests, results: DeferredToolResults) -> None:
        await emit(ctx, HeldResults(results=results))

    return {"on_deferred_requests": on_deferred_requests, "on_inline_deferred": on_inline_deferred}


async def documented_events(stream: AsyncIterable[AgentStreamEvent]) -> AsyncGenerator[AgentStreamEvent]:
    """``stream`` with ipybox's held-call events as PydanticAI's documented deferred-call events
    (closes ``stream`` when closed)."""
    try:
        async for event in stream:
            if isinstance(event, HeldRequests):
                yield DeferredToolRequestsEvent(event.requests)
            elif isinstance(event, HeldResults):
                yield DeferredToolResultsEvent(event.results)
            elif isinstance(event, DeferredToolRequestsEvent):
                yield DeferredToolRequestsEvent(named_requests(event.requests))
            else:
                yield event
    finally:
        aclose = getattr(stream, "aclose", None)
        if aclose is not None:
            await aclose()


async def emit(ctx: RunContext[Any], event: CapabilityEvent) -> None:
    """Emit into the run's event stream (skipped where the context has none, e.g. direct toolset use)."""
    with contextlib.suppress(UserError):
        await ctx.emit(event)
