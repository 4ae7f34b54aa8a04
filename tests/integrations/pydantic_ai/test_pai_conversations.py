"""Conversations: parked executions are keyed by (conversation, call), moving on cancels at once."""

from __future__ import annotations

import pytest
from pai_kit import ScriptedModel, returns_of, roundtrip, text_of
from pydantic_ai import Agent, DeferredToolRequests
from pydantic_ai.exceptions import UserError
from pydantic_ai.messages import repair_messages

from ipybox_core import CodeExecutor
from ipybox_integrations._session import ABANDONED_MESSAGE, BUSY_MESSAGE
from ipybox_integrations.pydantic_ai import CodeAction, approval_results, pending_approvals

pytestmark = pytest.mark.asyncio(loop_scope="package")

COUNT = "from mcptools.test import count\nprint('count', count())"


async def server_count(executor: CodeExecutor) -> int:
    """The test server's counter after one more call (each call increments it)."""
    result = await executor.execute("from mcptools.test import count\nprint(count())", approve_all=True)
    return int(result.text.strip())


async def test_repair_messages_cancels_the_parked_execution_at_once(executor: CodeExecutor) -> None:
    before = await server_count(executor)
    model = ScriptedModel([COUNT])
    code_action = CodeAction(executor)
    agent = Agent(model.model, capabilities=[code_action], output_type=[str, DeferredToolRequests])
    first = await agent.run("go", conversation_id="repair")
    assert isinstance(first.output, DeferredToolRequests) and executor.busy

    # The user moves on: the pending call is closed out and a new prompt follows.
    history = repair_messages(roundtrip(first.all_messages()))
    second = await agent.run("something else", message_history=history)

    assert not executor.busy and code_action.suspended == 0
    instructions = model.infos[-1].instructions or ""
    assert ABANDONED_MESSAGE in instructions  # the model is told what happened to its call
    assert isinstance(second.output, str)
    assert await server_count(executor) == before + 1  # count() never ran for the agent


async def test_an_agent_without_deferred_output_does_not_leave_the_execution_parked(
    executor: CodeExecutor,
) -> None:
    code_action = CodeAction(executor)
    wrong = Agent(ScriptedModel([COUNT]).model, capabilities=[code_action], output_type=str)
    with pytest.raises(UserError, match="DeferredToolRequests"):
        await wrong.run("go")
    assert not executor.busy and code_action.suspended == 0

    fixed = Agent(
        ScriptedModel([COUNT]).model, capabilities=[code_action], output_type=[str, DeferredToolRequests]
    )
    result = await fixed.run("go")
    assert isinstance(result.output, DeferredToolRequests)  # asks, is not refused as busy
    await code_action.cancel_suspended()


async def test_a_reused_tool_call_id_does_not_pick_up_another_conversations_approval(
    executor: CodeExecutor,
) -> None:
    code_action = CodeAction(executor)
    agent_a = Agent(
        ScriptedModel([COUNT]).model, capabilities=[code_action], output_type=[str, DeferredToolRequests]
    )
    agent_b = Agent(
        ScriptedModel(["print('b ran')"]).model,
        capabilities=[code_action],
        output_type=[str, DeferredToolRequests],
    )
    a = await agent_a.run("go", conversation_id="conv-a")
    assert isinstance(a.output, DeferredToolRequests)
    b = await agent_b.run("go", conversation_id="conv-b")  # the same tool call id, call_0_0
    assert not isinstance(b.output, DeferredToolRequests)  # not conversation A's question
    assert [text_of(part) for part in returns_of(b)] == [BUSY_MESSAGE]  # one kernel, A's call waits

    (approval,) = pending_approvals(a.output)
    done = await agent_a.run(
        message_history=roundtrip(a.all_messages()),
        deferred_tool_results=approval_results(a.output, {approval.tool_call_id: True}),
    )
    assert text_of(returns_of(done)[0]).startswith("count ")
