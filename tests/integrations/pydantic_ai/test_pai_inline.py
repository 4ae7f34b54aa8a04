"""Inline approvals: handler capabilities decide each MCP call during the run; streaming events."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from pai_kit import THREE_CALLS, ScriptedModel, returns_of, stream_run, text_of
from pydantic_ai import (
    Agent,
    DeferredToolRequests,
    DeferredToolResults,
    FunctionToolCallEvent,
    FunctionToolResultEvent,
    RunContext,
    ToolApproved,
    ToolDenied,
)
from pydantic_ai.capabilities import HandleDeferredToolCalls, RequestInput
from pydantic_ai.external_events import resolve_external_event

from ipybox_core import CodeExecutor
from ipybox_integrations.pydantic_ai import (
    ApprovalDecided,
    ApprovalRequested,
    CodeAction,
    CodeOutput,
    Decision,
    approval_results,
    pending_approvals,
)

pytestmark = pytest.mark.asyncio(loop_scope="package")


class Recorder:
    """A HandleDeferredToolCalls handler that records what it sees and answers with ``answer``."""

    def __init__(self, answer: Any = True) -> None:
        self.answer = answer
        self.seen: list[tuple[str, dict[str, Any], str | None]] = []

    async def __call__(
        self, ctx: RunContext[Any], requests: DeferredToolRequests
    ) -> DeferredToolResults | None:
        for call in requests.approvals:
            self.seen.append((call.tool_name, call.args_as_dict(), ctx.tool_name))
        if self.answer is None:
            return None
        if callable(self.answer):
            return requests.build_results(
                approvals={c.tool_call_id: self.answer(c) for c in requests.approvals}
            )
        return approval_results(requests, lambda a: self.answer)


def inline_agent(
    executor: CodeExecutor, model: ScriptedModel, handler: Any, **kwargs: Any
) -> Agent[None, Any]:
    return Agent(
        model.model, capabilities=[CodeAction(executor), HandleDeferredToolCalls(handler=handler)], **kwargs
    )


async def test_three_mcp_calls_approved_inline_in_one_run(executor: CodeExecutor) -> None:
    model = ScriptedModel([THREE_CALLS])
    handler = Recorder()
    result = await inline_agent(executor, model, handler).run("go")
    assert handler.seen == [
        ("add", {"a": 1, "b": 2}, "execute_code"),
        ("echo", {"message": "hello"}, "execute_code"),
        ("add", {"a": 3, "b": 10}, "execute_code"),
    ]
    assert model.calls == 2
    assert result.output == "done: 13 hello"


async def test_handler_sees_ipybox_metadata_and_pending_approvals_reads_it(executor: CodeExecutor) -> None:
    captured: list[DeferredToolRequests] = []

    async def handler(ctx: RunContext[Any], requests: DeferredToolRequests) -> DeferredToolResults:
        captured.append(requests)
        return approval_results(requests, lambda a: True)

    model = ScriptedModel(["from mcptools.test import add\nprint(add(a=2, b=3))"])
    result = await inline_agent(executor, model, handler).run("go")
    assert result.output == "done: 5"
    (approval,) = pending_approvals(captured[0])
    assert approval.inline
    assert (approval.name, approval.args, approval.execute_code_call_id) == (
        "test.add",
        {"a": 2, "b": 3},
        "call_0_0",
    )
    assert approval.tool_call_id.startswith("call_0_0__")


async def test_inline_denial_is_a_permission_error_the_code_catches(executor: CodeExecutor) -> None:
    code = """\
from mcptools.test import add, echo
try:
    echo(message="x")
except PermissionError as error:
    print("refused:", error)
print(add(a=1, b=1))
"""
    model = ScriptedModel([code])
    handler = Recorder(lambda call: ToolDenied("no echo") if call.tool_name == "echo" else ToolApproved())
    result = await inline_agent(executor, model, handler).run("go")
    assert result.output == "done: refused: test.echo was rejected: no echo\n2"


async def test_override_args_edit_the_mcp_call(executor: CodeExecutor) -> None:
    model = ScriptedModel(["from mcptools.test import add\nprint(add(a=1, b=1))"])
    handler = Recorder(lambda call: ToolApproved(override_args={"a": 20, "b": 22}))
    result = await inline_agent(executor, model, handler).run("go")
    assert result.output == "done: 42"


async def test_request_input_resolved_from_another_task(executor: CodeExecutor) -> None:
    questions: asyncio.Queue[tuple[str, DeferredToolRequests]] = asyncio.Queue()

    async def ask(ctx: RunContext[Any], requests: DeferredToolRequests, token: str) -> None:
        await questions.put((token, requests))

    async def approver() -> list[str]:
        names = []
        for _ in range(3):
            token, requests = await questions.get()
            (approval,) = pending_approvals(requests)
            names.append(approval.name)
            decision = Decision.reject("no") if approval.tool == "echo" else Decision.approve()
            resolve_external_event(token, approval_results(requests, {approval.tool_call_id: decision}))
        return names

    code = THREE_CALLS.replace(
        'said = echo(message="hello")',
        'said = "-"\ntry:\n    echo(message="x")\nexcept PermissionError:\n    said = "refused"',
    )
    model = ScriptedModel([code])
    agent = Agent(model.model, capabilities=[CodeAction(executor), RequestInput(ask=ask)])
    answering = asyncio.create_task(approver())
    result = await agent.run("go")
    assert await answering == ["test.add", "test.echo", "test.add"]
    assert result.output == "done: 13 refused"


async def test_declining_handler_falls_back_to_deferred(executor: CodeExecutor) -> None:
    model = ScriptedModel(["from mcptools.test import add\nprint(add(a=4, b=4))"])
    handler = Recorder(answer=None)
    agent = inline_agent(executor, model, handler, output_type=[str, DeferredToolRequests])
    result = await agent.run("go")
    assert isinstance(result.output, DeferredToolRequests)
    assert [name for name, _, _ in handler.seen] == ["add", "execute_code"]  # nested call, then the outer one
    answer = approval_results(result.output, lambda a: True)
    result = await agent.run(message_history=result.all_messages(), deferred_tool_results=answer)
    assert result.output == "done: 8"


async def test_failing_handler_fails_the_run_and_leaves_the_kernel_idle(executor: CodeExecutor) -> None:
    def handler(ctx: RunContext[Any], requests: DeferredToolRequests) -> DeferredToolResults:
        raise LookupError("approval service down")

    model = ScriptedModel(["from mcptools.test import add\nadd(a=1, b=1)"])
    with pytest.raises(LookupError, match="approval service down"):
        await inline_agent(executor, model, handler).run("go")
    assert not executor.busy


async def test_cancelled_run_interrupts_the_waiting_code(executor: CodeExecutor) -> None:
    asked = asyncio.Event()

    async def handler(ctx: RunContext[Any], requests: DeferredToolRequests) -> DeferredToolResults:
        asked.set()
        await asyncio.Event().wait()  # nobody answers
        raise AssertionError("unreachable")

    model = ScriptedModel(["from mcptools.test import add\nadd(a=1, b=1)"])
    run = asyncio.create_task(inline_agent(executor, model, handler).run("go"))
    await asked.wait()
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    assert not executor.busy


async def stream_kinds(agent: Agent[None, Any]) -> tuple[list[str], Any]:
    """The run's events, described: tool call/result, ipybox events; and the run's output."""
    kinds: list[str] = []
    events, result = await stream_run(agent, "go")
    for event in events:
        if isinstance(event, ApprovalRequested):
            kinds.append(f"requested {event.approval.name} {event.approval.args}")
            assert event.tool_call_id == "call_0_0"
        elif isinstance(event, ApprovalDecided):
            kinds.append(f"decided {event.name} approved={event.approved}")
        elif isinstance(event, CodeOutput):
            kinds.extend(f"output {line}" for line in event.text.splitlines())
        elif isinstance(event, (FunctionToolCallEvent, FunctionToolResultEvent)):
            kinds.append(type(event).__name__)
    return kinds, result.output


STREAMED_CODE = "from mcptools.test import add\nprint('adding')\nprint(add(a=1, b=2))"


async def test_streamed_run_shows_output_and_approvals_as_events(executor: CodeExecutor) -> None:
    model = ScriptedModel([STREAMED_CODE])
    kinds, output = await stream_kinds(inline_agent(executor, model, Recorder()))
    assert kinds[0] == "FunctionToolCallEvent"
    assert kinds[-1] == "FunctionToolResultEvent"
    approvals = [kind for kind in kinds if not kind.startswith("output")]
    assert approvals[1:3] == ["requested test.add {'a': 1, 'b': 2}", "decided test.add approved=True"]
    assert [kind for kind in kinds if kind.startswith("output")] == ["output adding", "output 3"]
    assert kinds.index("output 3") > kinds.index("decided test.add approved=True")
    assert output == "done: adding\n3"


# The executor holds an approval request until the output printed before the call has been read.
async def test_output_printed_before_a_call_streams_before_its_approval(executor: CodeExecutor) -> None:
    model = ScriptedModel([STREAMED_CODE])
    kinds, _ = await stream_kinds(inline_agent(executor, model, Recorder()))
    assert kinds.index("output adding") < kinds.index("requested test.add {'a': 1, 'b': 2}")


async def test_streamed_deferred_run_ends_with_requests_after_the_approval_event(
    executor: CodeExecutor,
) -> None:
    model = ScriptedModel(["from mcptools.test import add\nprint(add(a=1, b=2))"])
    agent = Agent(model.model, capabilities=[CodeAction(executor)], output_type=[str, DeferredToolRequests])
    events, result = await stream_run(agent, "go")
    assert [e.approval.name for e in events if isinstance(e, ApprovalRequested)] == ["test.add"]
    assert isinstance(result.output, DeferredToolRequests)
    answer = approval_results(result.output, lambda a: True)
    events, result = await stream_run(
        agent, message_history=result.all_messages(), deferred_tool_results=answer
    )
    decided = [(e.name, e.approved) for e in events if isinstance(e, ApprovalDecided)]
    assert decided == [("test.add", True)]
    assert [text_of(part) for part in returns_of(result)] == ["3"]


async def test_tool_names_with_dots_and_dashes_reach_the_handler_unchanged(executor: CodeExecutor) -> None:
    model = ScriptedModel(["from mcptools.test import text_to_upper\nprint(text_to_upper(text='ab'))"])
    handler = Recorder()
    result = await inline_agent(executor, model, handler).run("go")
    assert handler.seen == [("text.to-upper", {"text": "ab"}, "execute_code")]
    assert result.output == "done: AB"
