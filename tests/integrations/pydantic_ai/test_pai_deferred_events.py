"""PydanticAI's documented deferred-call events for the calls the code makes (issue 25).

A native ``requires_approval`` tool puts ``DeferredToolRequestsEvent`` into the run's event stream
before the handler is asked, and ``DeferredToolResultsEvent`` with the handler's answer; a run that
defers announces the requests its output carries. A held call of the code must look the same to a
frontend keyed to those events. Each test runs the native tool beside ipybox's ``execute_code``
with the same handler and compares. Real kernel, the real test MCP server; only the model is
scripted.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from pai_kit import TWO_CALLS, ScriptedModel, roundtrip, stream_run, text_of, tool_returns
from pydantic_ai import (
    Agent,
    AgentRunResultEvent,
    AgentStreamEvent,
    DeferredToolRequests,
    DeferredToolRequestsEvent,
    DeferredToolResults,
    DeferredToolResultsEvent,
    FunctionToolCallEvent,
    FunctionToolResultEvent,
    ModelMessage,
    ModelResponse,
    RunContext,
    TextPart,
    ToolApproved,
    ToolCallPart,
    ToolDenied,
)
from pydantic_ai.capabilities import HandleDeferredToolCalls
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, FunctionModel

from ipybox_core import CodeExecutor
from ipybox_integrations.pydantic_ai import ApprovalRequested, CodeAction

pytestmark = pytest.mark.asyncio(loop_scope="package")

ADD = "from mcptools.test import add\nprint(add(a=1, b=2))"


def native_model(calls: list[tuple[str, dict[str, Any]]]) -> FunctionModel:
    """A model calling each native tool in ``calls`` in turn (one per response), then answering."""

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        done = len(tool_returns(messages))
        if done < len(calls):
            name, args = calls[done]
            return ModelResponse(parts=[ToolCallPart(name, args, tool_call_id=f"native_{done}")])
        return ModelResponse(parts=[TextPart("done: " + " | ".join(map(text_of, tool_returns(messages))))])

    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[Any]:
        response = respond(messages, info)
        part = response.parts[0]
        if isinstance(part, TextPart):
            yield part.content
            return
        assert isinstance(part, ToolCallPart)
        yield {
            0: DeltaToolCall(
                name=part.tool_name, json_args=json.dumps(part.args), tool_call_id=part.tool_call_id
            )
        }

    return FunctionModel(respond, stream_function=stream)


def native_agent(calls: list[tuple[str, dict[str, Any]]], *capabilities: Any) -> Agent[None, Any]:
    """An agent whose own ``add`` and ``echo`` need approval (the test server's tools, natively)."""
    agent = Agent(
        native_model(calls), capabilities=list(capabilities), output_type=[str, DeferredToolRequests]
    )

    @agent.tool_plain(requires_approval=True)
    def add(a: int, b: int) -> int:
        return a + b

    @agent.tool_plain(requires_approval=True)
    def echo(message: str) -> str:
        return message

    return agent


def code_agent(executor: CodeExecutor, steps: list[str], *capabilities: Any) -> Agent[None, Any]:
    model = ScriptedModel(list(steps))
    return Agent(
        model.model,
        capabilities=[CodeAction(executor), *capabilities],
        output_type=[str, DeferredToolRequests],
    )


def decide(call: ToolCallPart) -> ToolApproved | ToolDenied:
    """The same answers for the native and the held calls: approve add, deny echo."""
    return ToolDenied("no echo") if call.tool_name == "echo" else ToolApproved()


def handler_answering(
    answer: Callable[[ToolCallPart], Any], seen: list[DeferredToolRequests] | None = None
) -> HandleDeferredToolCalls[Any]:
    async def handle(ctx: RunContext[Any], requests: DeferredToolRequests) -> DeferredToolResults:
        if seen is not None:
            seen.append(requests)
        return requests.build_results(
            approvals={call.tool_call_id: answer(call) for call in requests.approvals}
        )

    return HandleDeferredToolCalls(handler=handle)


def story(events: list[Any], *tools: str) -> list[Any]:
    """What a frontend keyed to the documented events sees: the ``tools``' calls and results, and each
    deferred request (tool, arguments) and answer, with the ids the answers refer to checked."""
    told: list[Any] = []
    announced: list[str] = []
    for event in events:
        if isinstance(event, FunctionToolCallEvent) and event.part.tool_name in tools:
            told.append("call")
        elif isinstance(event, FunctionToolResultEvent) and event.part.tool_name in tools:
            told.append("result")
        elif isinstance(event, DeferredToolRequestsEvent):
            announced = [call.tool_call_id for call in event.requests.approvals]
            told.append(("requests", [(c.tool_name, c.args_as_dict()) for c in event.requests.approvals]))
        elif isinstance(event, DeferredToolResultsEvent):
            assert list(event.results.approvals) == announced  # answers the requests announced
            told.append(("results", [_answer(a) for a in event.results.approvals.values()]))
    return told


def _answer(answer: Any) -> str:
    if isinstance(answer, ToolDenied):
        return f"denied: {answer.message}"
    return "approved" if answer is True or isinstance(answer, ToolApproved) else repr(answer)


NATIVE_STORY = [
    "call",
    ("requests", [("add", {"a": 1, "b": 2})]),
    ("results", ["approved"]),
    "result",
]


async def test_an_inline_held_call_streams_the_events_a_native_deferred_tool_streams(
    executor: CodeExecutor,
) -> None:
    native, _ = await stream_run(native_agent([("add", {"a": 1, "b": 2})], handler_answering(decide)), "go")
    assert story(native, "add") == NATIVE_STORY  # the reference: PydanticAI's own stream
    events, result = await stream_run(code_agent(executor, [ADD], handler_answering(decide)), "go")
    assert story(events, "execute_code") == NATIVE_STORY  # was: ["call", "result"]
    assert result.output == "done: 3"


async def test_two_held_calls_are_two_announced_requests_each_with_its_answer(executor: CodeExecutor) -> None:
    native_calls = [("add", {"a": 1, "b": 2}), ("echo", {"message": "hello"})]
    native, _ = await stream_run(native_agent(native_calls, handler_answering(decide)), "go")
    events, result = await stream_run(code_agent(executor, [TWO_CALLS], handler_answering(decide)), "go")
    add = [("requests", [("add", {"a": 1, "b": 2})]), ("results", ["approved"])]
    echo = [("requests", [("echo", {"message": "hello"})]), ("results", ["denied: no echo"])]
    assert story(native, "add", "echo") == ["call", *add, "result", "call", *echo, "result"]
    assert story(events, "execute_code") == ["call", *add, *echo, "result"]  # one call of the code
    assert result.output == "done: 3 refused (test.echo was rejected: no echo)"


async def test_the_announced_request_is_what_the_handler_is_given(executor: CodeExecutor) -> None:
    seen: list[DeferredToolRequests] = []
    events, _ = await stream_run(code_agent(executor, [ADD], handler_answering(decide, seen)), "go")
    (announced,) = [event.requests for event in events if isinstance(event, DeferredToolRequestsEvent)]
    (given,) = seen
    assert announced.approvals == given.approvals
    assert announced.metadata == given.metadata
    (call,) = announced.approvals
    (requested,) = [event.approval for event in events if isinstance(event, ApprovalRequested)]
    metadata = announced.metadata[call.tool_call_id]
    assert (metadata["approval_id"], metadata["server"], metadata["tool"]) == (
        requested.approval_id,
        "test",
        "add",
    )
    assert metadata["read_only"] is True and "description" in metadata  # add is read-only


async def test_a_frontend_answers_the_request_it_sees_while_the_handler_waits(executor: CodeExecutor) -> None:
    """The handler waits for a person; the frontend shows each request from the event and answers."""
    answers: dict[str, asyncio.Future[Any]] = {}

    def answer_for(tool_call_id: str) -> asyncio.Future[Any]:
        return answers.setdefault(tool_call_id, asyncio.get_running_loop().create_future())

    async def wait_for_the_person(
        ctx: RunContext[Any], requests: DeferredToolRequests
    ) -> DeferredToolResults:
        decided = {}
        for call in requests.approvals:
            try:  # a hang guard, not a timing assertion: without the event nobody ever answers
                decided[call.tool_call_id] = await asyncio.wait_for(answer_for(call.tool_call_id), 120)
            except TimeoutError:
                raise AssertionError("the request never reached the frontend") from None
        return requests.build_results(approvals=decided)

    async def frontend(agent: Agent[None, Any]) -> tuple[list[str], Any]:
        shown: list[str] = []
        async with agent.run_stream_events("go") as stream:
            async for event in stream:
                if isinstance(event, DeferredToolRequestsEvent):
                    for call in event.requests.approvals:
                        shown.append(f"{call.tool_name}({call.args_as_dict()})?")
                        answer_for(call.tool_call_id).set_result(decide(call))
                elif isinstance(event, AgentRunResultEvent):
                    output = event.result.output
        return shown, output

    native = native_agent([("add", {"a": 1, "b": 2})], HandleDeferredToolCalls(handler=wait_for_the_person))
    assert await frontend(native) == (["add({'a': 1, 'b': 2})?"], "done: 3")
    agent = code_agent(executor, [TWO_CALLS], HandleDeferredToolCalls(handler=wait_for_the_person))
    shown, output = await frontend(agent)
    assert shown == ["add({'a': 1, 'b': 2})?", "echo({'message': 'hello'})?"]
    assert output == "done: 3 refused (test.echo was rejected: no echo)"


async def test_a_deferred_run_announces_the_mcp_call_its_output_carries(executor: CodeExecutor) -> None:
    native, native_result = await stream_run(native_agent([("add", {"a": 1, "b": 2})]), "go")
    (native_event,) = [event for event in native if isinstance(event, DeferredToolRequestsEvent)]
    assert native_event.requests.approvals == native_result.output.approvals  # the reference

    agent = code_agent(executor, [TWO_CALLS])
    events, result = await stream_run(agent, "go")
    (event,) = [event for event in events if isinstance(event, DeferredToolRequestsEvent)]  # one, not two
    assert isinstance(result.output, DeferredToolRequests)
    assert event.requests.approvals == result.output.approvals  # was: execute_code with the code
    (call,) = event.requests.approvals
    assert (call.tool_name, call.args_as_dict(), call.tool_call_id) == ("add", {"a": 1, "b": 2}, "call_0_0")
    assert event.requests.metadata == result.output.metadata

    # Resumed with the answer (no DeferredToolResultsEvent, as natively), the next call is announced.
    events, result = await stream_run(
        agent,
        message_history=roundtrip(result.all_messages()),
        deferred_tool_results=result.output.build_results(approvals={"call_0_0": True}),
    )
    assert not [e for e in events if isinstance(e, DeferredToolResultsEvent)]
    assert story(events, "execute_code") == ["call", ("requests", [("echo", {"message": "hello"})])]
    await agent.run(
        message_history=result.all_messages(),
        deferred_tool_results=result.output.build_results(approvals={"call_0_0": False}),
    )


async def stream_with_iter(agent: Agent[None, Any]) -> list[AgentStreamEvent]:
    seen: list[AgentStreamEvent] = []
    async with agent.iter("go") as run:
        async for node in run:
            if Agent.is_call_tools_node(node) or Agent.is_model_request_node(node):
                async with node.stream(run.ctx) as stream:
                    seen.extend([event async for event in stream])
    return seen


async def stream_with_handler(agent: Agent[None, Any]) -> list[AgentStreamEvent]:
    seen: list[AgentStreamEvent] = []

    async def handle(ctx: RunContext[Any], stream: Any) -> None:
        seen.extend([event async for event in stream])

    await agent.run("go", event_stream_handler=handle)
    return seen


@pytest.mark.parametrize("driven_by", [stream_with_iter, stream_with_handler])
async def test_iter_and_event_stream_handlers_see_the_events_too(
    executor: CodeExecutor, driven_by: Any
) -> None:
    events = await driven_by(code_agent(executor, [ADD], handler_answering(decide)))
    assert story(events, "execute_code") == NATIVE_STORY


async def test_a_run_nobody_streams_does_not_need_a_streaming_model(executor: CodeExecutor) -> None:
    """Control: translating the events must not make ``agent.run()`` stream the model's requests."""
    scripted = ScriptedModel([ADD])
    model = FunctionModel(scripted.model.function)  # no stream_function: streamed requests fail
    agent = Agent(model, capabilities=[CodeAction(executor), handler_answering(decide)])
    assert (await agent.run("go")).output == "done: 3"


async def test_a_held_call_of_an_agent_tool_is_announced_like_its_native_call(executor: CodeExecutor) -> None:
    code = "from agent_tools import refund\nprint(refund(order='A1'))"
    model = ScriptedModel([code])
    agent = Agent(model.model, capabilities=[CodeAction(executor), handler_answering(decide)])

    @agent.tool_plain(requires_approval=True)
    def refund(order: str) -> str:
        """Refund an order."""
        return f"refunded {order}"

    events, result = await stream_run(agent, "go")
    assert story(events, "execute_code") == [
        "call",
        ("requests", [("refund", {"order": "A1"})]),
        ("results", ["approved"]),
        "result",
    ]
    assert result.output == "done: refunded A1"
