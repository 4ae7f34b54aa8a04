"""Helpers for the PydanticAI tests: a scripted model that writes code, and a deferred-approval loop."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic_ai import (
    Agent,
    AgentRunResult,
    AgentRunResultEvent,
    AgentStreamEvent,
    DeferredToolRequests,
    ModelMessage,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.messages import ModelMessagesTypeAdapter
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, FunctionModel

from ipybox_integrations.pydantic_ai import DecisionLike, PendingApproval, approval_results, pending_approvals

THREE_CALLS = """\
from mcptools.test import add, echo
total = add(a=1, b=2)
said = echo(message="hello")
total = add(a=total, b=10)
print(total, said)
"""
"""Code making three MCP calls; prints ``13 hello`` when all are approved."""

TWO_CALLS = """\
from mcptools.test import add, echo
total = add(a=1, b=2)
try:
    said = echo(message="hello")
except PermissionError as error:
    said = f"refused ({error})"
print(total, said)
"""
"""Code making two MCP calls, the second's rejection caught; prints ``3 hello`` when both are approved."""

Step = str | dict[str, Any] | Sequence[str]
"""Code (or the arguments) of one execute_code call, or several codes for parallel calls in one response."""


@dataclass
class ScriptedModel:
    """A model that calls ``execute_code`` with each step's code, then answers with the tool returns.

    The step is chosen by how many tool returns the history holds, as a real model would move on
    once it sees a result. ``infos`` records every request (instructions, tools).
    """

    steps: list[Step]
    infos: list[AgentInfo] = field(default_factory=list)
    histories: list[list[ModelMessage]] = field(default_factory=list)

    @property
    def calls(self) -> int:
        return len(self.infos)

    @property
    def model(self) -> FunctionModel:
        return FunctionModel(self._respond, stream_function=self._stream)

    def _respond(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.infos.append(info)
        self.histories.append(list(messages))
        returns = tool_returns(messages)
        done = 0
        for index, step in enumerate(self.steps):
            calls = [step] if isinstance(step, (str, dict)) else list(step)
            if len(returns) < done + len(calls):
                parts = [
                    ToolCallPart(
                        "execute_code",
                        call if isinstance(call, dict) else {"code": call},
                        tool_call_id=f"call_{index}_{n}",
                    )
                    for n, call in enumerate(calls)
                ]
                return ModelResponse(parts=parts)
            done += len(calls)
        return ModelResponse(parts=[TextPart("done: " + " | ".join(text_of(r) for r in returns))])

    async def _stream(self, messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[Any]:
        response = self._respond(messages, info)
        if isinstance(response.parts[0], TextPart):
            yield response.parts[0].content
            return
        yield {
            n: DeltaToolCall(
                name=part.tool_name, json_args=json.dumps(part.args), tool_call_id=part.tool_call_id
            )
            for n, part in enumerate(response.parts)
            if isinstance(part, ToolCallPart)
        }


def tool_returns(messages: Sequence[ModelMessage]) -> list[ToolReturnPart]:
    return [part for message in messages for part in message.parts if isinstance(part, ToolReturnPart)]


def text_of(part: ToolReturnPart) -> str:
    """The text of a tool return (images left out)."""
    content = part.content
    if isinstance(content, list):
        return " ".join(item for item in content if isinstance(item, str))
    return str(content)


def returns_of(result: AgentRunResult[Any]) -> list[ToolReturnPart]:
    return tool_returns(result.all_messages())


def roundtrip(messages: list[ModelMessage]) -> list[ModelMessage]:
    """Serialise and restore a history, as an app keeping it between requests would."""
    return ModelMessagesTypeAdapter.validate_json(ModelMessagesTypeAdapter.dump_json(messages))


async def run_deferred(
    agent: Agent[Any, Any],
    decide: Callable[[PendingApproval], DecisionLike],
    prompt: str = "go",
    *,
    max_rounds: int = 20,
) -> tuple[AgentRunResult[Any], list[PendingApproval]]:
    """Run, answering every DeferredToolRequests with ``decide``; returns the result and all approvals seen."""
    result = await agent.run(prompt)
    seen: list[PendingApproval] = []
    for _ in range(max_rounds):
        if not isinstance(result.output, DeferredToolRequests):
            return result, seen
        seen.extend(pending_approvals(result.output))
        results = approval_results(result.output, decide)
        result = await agent.run(
            message_history=roundtrip(result.all_messages()), deferred_tool_results=results
        )
    raise AssertionError(f"still deferred after {max_rounds} rounds")


async def stream_run(
    agent: Agent[Any, Any], *args: Any, **kwargs: Any
) -> tuple[list[AgentStreamEvent | AgentRunResultEvent[Any]], AgentRunResult[Any]]:
    """Run with ``run_stream_events``; returns every event and the run's result."""
    seen: list[AgentStreamEvent | AgentRunResultEvent[Any]] = []
    result: AgentRunResult[Any] | None = None
    async with agent.run_stream_events(*args, **kwargs) as events:
        async for event in events:
            seen.append(event)
            if isinstance(event, AgentRunResultEvent):
                result = event.result
    assert result is not None
    return seen, result
