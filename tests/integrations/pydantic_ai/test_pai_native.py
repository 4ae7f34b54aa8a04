"""Deferred approvals answered the PydanticAI way: ``build_results``, ``True``/``False``,
``ToolApproved(override_args=...)``, ``ToolDenied(message)``, and PydanticAI's own Vercel AI UI adapter."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pai_kit import TWO_CALLS, ScriptedModel, returns_of, roundtrip, text_of
from pydantic_ai import Agent, DeferredToolRequests, DeferredToolResults, ToolApproved, ToolDenied
from pydantic_ai.ui.vercel_ai import VercelAIAdapter

from ipybox_core import CodeExecutor
from ipybox_integrations.pydantic_ai import CodeAction, approval_results, pending_approvals

pytestmark = pytest.mark.asyncio(loop_scope="package")


def deferred_agent(executor: CodeExecutor, model: ScriptedModel) -> Agent[None, object]:
    return Agent(
        model.model,
        capabilities=[CodeAction(executor)],  # type: ignore[arg-type]
        output_type=[str, DeferredToolRequests],
    )


async def answer_each(
    agent: Agent[None, object], answers: list[Any], prompt: str = "go"
) -> tuple[Any, list[DeferredToolRequests]]:
    """Run, answering the n-th deferred request with ``answers[n](requests)``."""
    result = await agent.run(prompt)
    seen: list[DeferredToolRequests] = []
    for answer in answers:
        assert isinstance(result.output, DeferredToolRequests), result.output
        seen.append(result.output)
        result = await agent.run(
            message_history=roundtrip(result.all_messages()), deferred_tool_results=answer(result.output)
        )
    return result, seen


async def test_the_deferred_request_names_the_mcp_call_it_holds(executor: CodeExecutor) -> None:
    model = ScriptedModel([TWO_CALLS])
    result = await deferred_agent(executor, model).run("go")
    assert isinstance(result.output, DeferredToolRequests)
    (call,) = result.output.approvals
    assert (call.tool_name, call.args_as_dict(), call.tool_call_id) == ("add", {"a": 1, "b": 2}, "call_0_0")
    (pending,) = pending_approvals(result.output)  # ipybox's reader still sees the same request
    assert (pending.name, pending.tool_call_id) == ("test.add", "call_0_0")
    await deferred_agent(executor, model).run(
        message_history=result.all_messages(),
        deferred_tool_results=approval_results(result.output, lambda a: False),
    )


async def test_build_results_approve_all_and_true_approve_held_calls(executor: CodeExecutor) -> None:
    model = ScriptedModel([TWO_CALLS])
    result, seen = await answer_each(
        deferred_agent(executor, model),
        [
            lambda r: r.build_results(approve_all=True),
            lambda r: r.build_results(approvals={"call_0_0": True}),
        ],
    )
    assert [r.approvals[0].tool_name for r in seen] == ["add", "echo"]
    assert result.output == "done: 3 hello"


async def test_tool_denied_rejects_the_held_call_with_its_message_and_the_code_goes_on(
    executor: CodeExecutor,
) -> None:
    model = ScriptedModel([TWO_CALLS])
    result, _ = await answer_each(
        deferred_agent(executor, model),
        [
            lambda r: DeferredToolResults(approvals={"call_0_0": True}),
            lambda r: DeferredToolResults(approvals={"call_0_0": ToolDenied("not today")}),
        ],
    )
    assert result.output == "done: 3 refused (test.echo was rejected: not today)"
    (execute_code,) = returns_of(result)
    assert execute_code.outcome == "success"  # the call was rejected, not the code


async def test_false_rejects_with_pydantic_ais_default_message(executor: CodeExecutor) -> None:
    model = ScriptedModel([TWO_CALLS])
    result, _ = await answer_each(
        deferred_agent(executor, model),
        [
            lambda r: DeferredToolResults(approvals={"call_0_0": True}),
            lambda r: r.build_results(approvals={"call_0_0": False}),
        ],
    )
    assert result.output == f"done: 3 refused (test.echo was rejected: {ToolDenied().message})"


async def test_tool_approved_override_args_edits_the_mcp_call_not_the_code(executor: CodeExecutor) -> None:
    code = "from mcptools.test import echo\nprint(echo(message='as written'))"
    model = ScriptedModel([code])
    result, _ = await answer_each(
        deferred_agent(executor, model),
        [
            lambda r: DeferredToolResults(
                approvals={"call_0_0": ToolApproved(override_args={"message": "edited"})}
            )
        ],
    )
    assert result.output == "done: edited"


async def test_a_bound_answer_for_an_earlier_call_is_still_ignored(executor: CodeExecutor) -> None:
    model = ScriptedModel([TWO_CALLS])
    agent = deferred_agent(executor, model)
    result = await agent.run("go")
    assert isinstance(result.output, DeferredToolRequests)
    round_one = approval_results(result.output, lambda a: True)  # carries the first call's approval_id
    result = await agent.run(message_history=result.all_messages(), deferred_tool_results=round_one)
    assert isinstance(result.output, DeferredToolRequests)
    result = await agent.run(message_history=result.all_messages(), deferred_tool_results=round_one)
    assert isinstance(result.output, DeferredToolRequests)
    assert result.output.approvals[0].tool_name == "echo"
    assert "answer was ignored" in result.output.metadata["call_0_0"]["note"]
    result = await agent.run(
        message_history=result.all_messages(),
        deferred_tool_results=result.output.build_results(approve_all=True),
    )
    assert result.output == "done: 3 hello"


async def test_a_new_prompt_moves_on_from_a_waiting_call_without_repairing_the_history(
    executor: CodeExecutor,
) -> None:
    model = ScriptedModel([TWO_CALLS, "print('next turn')"])
    agent = deferred_agent(executor, model)
    result = await agent.run("go")
    assert isinstance(result.output, DeferredToolRequests)
    assert executor.busy
    result = await agent.run("something else", message_history=result.all_messages())
    assert not executor.busy  # the waiting execution was cancelled
    first, second = returns_of(result)
    assert first.tool_call_id == "call_0_0" and "abandoned without a decision" in text_of(first)
    assert text_of(second) == "next turn"


async def test_cancel_suspended_of_one_conversation_leaves_the_others_waiting(
    executor: CodeExecutor,
) -> None:
    code = "from mcptools.test import add\nprint(add(a=1, b=1))"
    capability = CodeAction(executor)
    agent = Agent(
        ScriptedModel([code]).model, capabilities=[capability], output_type=[str, DeferredToolRequests]
    )
    waiting = await agent.run("go", conversation_id="alice")
    assert isinstance(waiting.output, DeferredToolRequests)
    assert await capability.cancel_suspended(conversation="bob") == 0
    assert executor.busy
    assert await capability.cancel_suspended(conversation="alice") == 1
    assert not executor.busy


# --- PydanticAI's own Vercel AI adapter (AI SDK v6 tool approvals) ------------------------------


def _ui_messages(body: str) -> list[dict[str, Any]]:
    return [json.loads(line[6:]) for line in body.splitlines() if line.startswith("data: {")]


async def _vercel_round(agent: Agent[None, object], messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    run_input = VercelAIAdapter.build_run_input(
        json.dumps({"trigger": "submit-message", "id": "chat", "messages": messages}).encode()
    )
    adapter = VercelAIAdapter(agent=agent, run_input=run_input, sdk_version=6)
    chunks = [chunk async for chunk in adapter.encode_stream(adapter.run_stream())]
    return _ui_messages("".join(chunks))


def _assistant_message(
    events: list[dict[str, Any]], approved: bool, reason: str | None = None
) -> dict[str, Any]:
    """The assistant UI message a Vercel AI frontend holds after the stream, with the user's answer."""
    inputs = {e["toolCallId"]: e for e in events if e["type"] == "tool-input-available"}
    (request,) = [e for e in events if e["type"] == "tool-approval-request"]
    call = inputs[request["toolCallId"]]
    approval: dict[str, Any] = {"id": request["approvalId"], "approved": approved}
    if reason is not None:
        approval["reason"] = reason
    part = {
        "type": f"tool-{call['toolName']}",
        "toolCallId": call["toolCallId"],
        "state": "approval-responded",
        "input": call["input"],
        "approval": approval,
    }
    return {"id": "assistant-1", "role": "assistant", "parts": [part]}


async def test_vercel_ai_adapter_round_trip_approves_then_rejects(executor: CodeExecutor) -> None:
    model = ScriptedModel([TWO_CALLS])
    agent = deferred_agent(executor, model)
    user = {"id": "user-1", "role": "user", "parts": [{"type": "text", "text": "go"}]}

    events = await _vercel_round(agent, [user])
    assert [e["type"] for e in events].count("tool-approval-request") == 1
    events = await _vercel_round(agent, [user, _assistant_message(events, approved=True)])
    assert [e["type"] for e in events].count("tool-approval-request") == 1  # the second call now
    events = await _vercel_round(agent, [user, _assistant_message(events, approved=False, reason="no echo")])

    outputs = [e for e in events if e["type"] == "tool-output-available"]
    assert len(outputs) == 1 and "3 refused (test.echo was rejected: no echo)" in str(outputs[0]["output"])
    assert not executor.busy
