"""Deferred approvals: the run ends with DeferredToolRequests per MCP call while the kernel waits."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from pai_kit import THREE_CALLS, ScriptedModel, returns_of, roundtrip, run_deferred, stream_run, text_of
from pydantic_ai import Agent, DeferredToolRequests, DeferredToolResults, ToolApproved

from ipybox_core import CodeExecutor
from ipybox_integrations._session import BUSY_MESSAGE
from ipybox_integrations.pydantic_ai import CodeAction, Decision, approval_results, pending_approvals

pytestmark = pytest.mark.asyncio(loop_scope="package")


def deferred_agent(executor: CodeExecutor, model: ScriptedModel, **options: object) -> Agent[None, object]:
    return Agent(
        model.model,
        capabilities=[CodeAction(executor, **options)],  # type: ignore[arg-type]
        output_type=[str, DeferredToolRequests],
    )


async def test_three_mcp_calls_take_three_rounds_and_two_model_calls(executor: CodeExecutor) -> None:
    model = ScriptedModel([THREE_CALLS])
    agent = deferred_agent(executor, model)

    result = await agent.run("go")
    rounds = []
    while isinstance(result.output, DeferredToolRequests):
        assert [call.tool_call_id for call in result.output.approvals] == ["call_0_0"]  # execute_code's id
        assert model.calls == 1  # no model request while the kernel waits
        (approval,) = pending_approvals(result.output)
        rounds.append((approval.name, approval.args, approval.tool_call_id))
        answer = approval_results(result.output, {approval.tool_call_id: True})
        result = await agent.run(
            message_history=roundtrip(result.all_messages()), deferred_tool_results=answer
        )

    assert rounds == [
        ("test.add", {"a": 1, "b": 2}, "call_0_0"),
        ("test.echo", {"message": "hello"}, "call_0_0"),
        ("test.add", {"a": 3, "b": 10}, "call_0_0"),
    ]
    assert model.calls == 2
    assert result.output == "done: 13 hello"
    assert [part.outcome for part in returns_of(result)] == ["success"]


async def test_metadata_names_server_tool_arguments_and_a_unique_approval_id(executor: CodeExecutor) -> None:
    model = ScriptedModel(["from mcptools.test import add\nadd(a=5, b=6)"])
    code_action = CodeAction(executor)
    agent = Agent(model.model, capabilities=[code_action], output_type=[str, DeferredToolRequests])
    result = await agent.run("go")
    assert isinstance(result.output, DeferredToolRequests)
    metadata = result.output.metadata["call_0_0"]
    assert metadata["server"] == "test"
    assert metadata["tool"] == "add"
    assert metadata["args"] == {"a": 5, "b": 6}
    assert metadata["kind"] == "mcp"
    assert metadata["read_only"] is True
    assert "add(a=5, b=6)" in metadata["description"]
    assert len(metadata["approval_id"]) == 32
    await code_action.aclose()


async def test_rejection_raises_permission_error_that_the_code_catches(executor: CodeExecutor) -> None:
    code = """\
from mcptools.test import echo
try:
    echo(message="secret")
except PermissionError as error:
    print("refused:", error)
print("went on")
"""
    model = ScriptedModel([code])
    result, seen = await run_deferred(
        deferred_agent(executor, model), lambda a: Decision.reject("no secrets")
    )
    assert [a.name for a in seen] == ["test.echo"]
    (returned,) = returns_of(result)
    assert returned.outcome == "success"
    assert "refused:" in text_of(returned)
    assert "no secrets" in text_of(returned)
    assert text_of(returned).endswith("went on")


async def test_edited_arguments_are_what_the_server_receives(executor: CodeExecutor) -> None:
    model = ScriptedModel(["from mcptools.test import add\nprint(add(a=1, b=1))"])
    result, _ = await run_deferred(
        deferred_agent(executor, model), lambda a: Decision.approve(arguments={"a": 40, "b": 2})
    )
    assert result.output == "done: 42"


async def test_tool_denied_aborts_the_execution_and_interrupts_the_kernel(executor: CodeExecutor) -> None:
    aborting = """\
from mcptools.test import add
before = add(a=1, b=1)
after = add(a=2, b=2)
print("not reached")
"""
    model = ScriptedModel([aborting, "print(before, 'after' in dir())"])
    agent = deferred_agent(executor, model)

    result, seen = await run_deferred(agent, lambda a: Decision.abort() if a.args["a"] == 2 else True)

    assert [a.args for a in seen] == [{"a": 1, "b": 1}, {"a": 2, "b": 2}]
    denied, second = returns_of(result)
    assert denied.outcome == "denied"
    assert "stopped this code execution" in text_of(denied)
    assert text_of(second) == "2 False"  # state before the denied call kept; nothing after it ran


async def test_stale_or_replayed_bound_approvals_do_not_approve_the_next_call(
    executor: CodeExecutor,
) -> None:
    code = """\
from mcptools.test import add, echo
first = add(a=1, b=2)
try:
    echo(message="second")
except PermissionError as error:
    print("second refused:", error)
print("first", first)
"""
    model = ScriptedModel([code])
    agent = deferred_agent(executor, model)
    result = await agent.run("go")
    assert isinstance(result.output, DeferredToolRequests)
    round_one = approval_results(result.output, lambda a: True)
    result = await agent.run(message_history=result.all_messages(), deferred_tool_results=round_one)
    assert isinstance(result.output, DeferredToolRequests)
    (pending,) = pending_approvals(result.output)
    assert pending.name == "test.echo"

    replays: list[DeferredToolResults | None] = [
        round_one,  # round 1's answer (bound to round 1's approval_id) sent again
        DeferredToolResults(  # a bound answer for a call that is not the one waiting
            approvals={"call_0_0": ToolApproved()}, metadata={"call_0_0": {"approval_id": "0" * 32}}
        ),
        None,  # history only: the pending call is asked again
    ]
    for replay in replays:
        result = await agent.run(message_history=result.all_messages(), deferred_tool_results=replay)
        assert isinstance(result.output, DeferredToolRequests)
        (still,) = pending_approvals(result.output)
        assert (still.approval_id, still.name) == (pending.approval_id, "test.echo")
        if replay is not None:
            assert "answer was ignored" in result.output.metadata["call_0_0"]["note"]

    answer = approval_results(result.output, lambda a: Decision.reject("not this one"))
    result = await agent.run(message_history=result.all_messages(), deferred_tool_results=answer)
    assert result.output == "done: second refused: test.echo was rejected: not this one\nfirst 3"
    assert model.calls == 2


async def test_second_execute_code_while_one_waits_is_refused_with_a_message(executor: CodeExecutor) -> None:
    parallel = ["from mcptools.test import add\nprint(add(a=1, b=1))", "print('second')"]
    model = ScriptedModel([parallel])
    result, seen = await run_deferred(deferred_agent(executor, model), lambda a: True)
    assert len(seen) == 1
    returned = {part.tool_call_id: text_of(part) for part in returns_of(result)}
    assert returned == {"call_0_0": "2", "call_0_1": BUSY_MESSAGE}


async def test_abandoned_suspended_execution_is_interrupted_after_abandon_after(
    executor: CodeExecutor,
) -> None:
    code = "from mcptools.test import add\nx_abandoned = add(a=1, b=1)"
    model = ScriptedModel([code, "print('x_abandoned' in dir())"])
    agent = deferred_agent(executor, model, abandon_after=0.3)
    result = await agent.run("go")
    assert isinstance(result.output, DeferredToolRequests)
    for _ in range(200):
        if not executor.busy:
            break
        await asyncio.sleep(0.05)
    assert not executor.busy, "the abandoned execution was not interrupted"

    late = approval_results(result.output, lambda a: True)
    result = await agent.run(message_history=result.all_messages(), deferred_tool_results=late)
    stale, after = returns_of(result)
    assert "no longer waits for an approval: it was cancelled (abandoned: nobody decided" in text_of(stale)
    assert text_of(after) == "False"  # the stale approval ran nothing


async def test_aclose_interrupts_a_suspended_execution(executor: CodeExecutor) -> None:
    code_action = CodeAction(executor)
    agent = Agent(
        ScriptedModel(["from mcptools.test import add\nadd(a=1, b=1)"]).model,
        capabilities=[code_action],
        output_type=[str, DeferredToolRequests],
    )
    result = await agent.run("go")
    assert isinstance(result.output, DeferredToolRequests)
    assert code_action.suspended == 1
    await code_action.aclose()
    assert code_action.suspended == 0
    assert not executor.busy
    await code_action.aclose()  # idempotent


async def test_execution_that_finished_while_suspended_returns_its_result(
    tmp_path: Path, clean_raw_server_config: dict[str, Any]
) -> None:
    code = """\
from mcptools.raw import echo
try:
    echo(text="late")
except PermissionError as error:
    print("refused:", error)
"""
    model = ScriptedModel([code])
    async with CodeAction(
        workspace=tmp_path, mcp_servers={"raw": clean_raw_server_config}, approval_timeout=0.2
    ) as code_action:
        agent = Agent(model.model, capabilities=[code_action], output_type=[str, DeferredToolRequests])
        result = await agent.run("go")
        assert isinstance(result.output, DeferredToolRequests)
        for _ in range(200):  # the approval times out in the executor and the code runs to its end
            if not code_action.executor.busy:
                break
            await asyncio.sleep(0.05)
        late = approval_results(result.output, lambda a: True)
        result = await agent.run(message_history=result.all_messages(), deferred_tool_results=late)
    assert (
        result.output
        == "done: refused: raw.echo was rejected: approval timed out after 0.2 s without a decision"
    )


async def test_tool_denied_in_a_streamed_run_also_interrupts_the_kernel(executor: CodeExecutor) -> None:
    model = ScriptedModel(["from mcptools.test import add\nstreamed_sum = add(a=1, b=1)", "print('next')"])
    agent = deferred_agent(executor, model)
    _, result = await stream_run(agent, "go")
    assert isinstance(result.output, DeferredToolRequests)
    abort = approval_results(result.output, lambda a: Decision.abort("no"))
    _, result = await stream_run(agent, message_history=result.all_messages(), deferred_tool_results=abort)
    assert [(part.outcome, text_of(part)) for part in returns_of(result)] == [
        ("denied", "no"),
        ("success", "next"),
    ]
