"""Suspended executions across graph runs: abandonment, lost executions, resume styles, HITL next to us."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import HumanInTheLoopMiddleware
from langchain_core.messages import AIMessage, BaseMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command
from lc_kit import (
    APPROVE,
    ScriptedChatModel,
    action,
    config,
    make_agent,
    only_interrupt,
    reject,
    resume,
    run_code_then_finish,
    text_of,
    tool_call,
    tool_messages,
    user,
)

from ipybox_core import CodeExecutor
from ipybox_integrations.langchain import CodeActionMiddleware, execute_code_tool

pytestmark = pytest.mark.asyncio(loop_scope="package")

TWO_STEPS = "from mcptools.test import add\n{marker} = 'started'\nadd(a=1, b=1)\n{marker} = 'finished'\nprint({marker})"


async def kernel_value(executor: CodeExecutor, name: str) -> str:
    return (await executor.execute(f"print(globals().get({name!r}))")).text.strip()


async def test_new_input_cancels_the_execution_left_waiting(idle_executor: CodeExecutor) -> None:
    code = TWO_STEPS.format(marker="left_mw")

    def script(messages: list[BaseMessage]) -> AIMessage:
        if messages[-1].type == "human" and messages[-1].text == "first":
            return AIMessage(content="", tool_calls=[tool_call(code)])
        return AIMessage(content="fine, something else")

    _, agent = make_agent([CodeActionMiddleware(idle_executor)], script)
    only_interrupt(await agent.ainvoke(user("first"), config("abandon"), version="v2"))
    assert idle_executor.busy

    out = await agent.ainvoke(user("something else"), config("abandon"), version="v2")  # instead of answering
    assert not out.interrupts
    assert not idle_executor.busy
    assert await kernel_value(idle_executor, "left_mw") == "started"  # stopped inside the waiting call
    # The abandoned call got a result saying so, right after the message that made it (before the
    # new input): the model was told, and a provider that needs a result for every call accepts it.
    kinds = [(m.type, getattr(m, "tool_call_id", None)) for m in out.value["messages"]]
    assert kinds == [("human", None), ("ai", None), ("tool", "call_1"), ("human", None), ("ai", None)]
    closing = out.value["messages"][2]
    assert closing.status == "error" and "abandoned" in text_of(closing) and "did not run" in text_of(closing)


async def test_plain_tool_cancels_an_execution_abandoned_by_an_earlier_turn(
    idle_executor: CodeExecutor,
) -> None:
    model = ScriptedChatModel(script=run_code_then_finish(TWO_STEPS.format(marker="left_tool")))
    agent = create_agent(model, tools=[execute_code_tool(idle_executor)], checkpointer=InMemorySaver())
    only_interrupt(await agent.ainvoke(user("first"), config("abandon-tool"), version="v2"))
    out = await agent.ainvoke(user("again"), config("abandon-tool"), version="v2")
    only_interrupt(out)
    out = await resume(agent, "abandon-tool", APPROVE)
    assert [text_of(m) for m in tool_messages(out.value)] == ["finished"]


async def test_an_execution_gone_before_the_answer_is_not_run_again(idle_executor: CodeExecutor) -> None:
    code = "from mcptools.test import add\nruns_lost = globals().get('runs_lost', 0) + 1\nadd(a=1, b=1)"
    middleware = CodeActionMiddleware(idle_executor, abandon_after=0.0)
    _, agent = make_agent([middleware], run_code_then_finish(code))
    only_interrupt(await agent.ainvoke(user(), config("lost"), version="v2"))
    out = await resume(agent, "lost", APPROVE)
    (message,) = tool_messages(out.value)
    assert message.status == "error"
    assert "nobody decided this call within 0 s" in text_of(message) and "did not run" in text_of(message)
    assert await kernel_value(idle_executor, "runs_lost") == "1"


async def test_a_stale_resume_value_is_not_taken_as_the_answer_to_a_new_question(
    idle_executor: CodeExecutor,
) -> None:
    # Mixing plain and id-keyed resumes makes LangGraph deliver the first, consumed plain answer again
    # (langgraph#8837); the tool must ask the human instead of approving the third call with it.
    code = "from mcptools.test import add\nprint(add(a=1, b=0), add(a=2, b=0), add(a=3, b=0))"
    _, agent = make_agent([CodeActionMiddleware(idle_executor)], run_code_then_finish(code))
    out = await agent.ainvoke(user(), config("stale"), version="v2")
    out = await resume(agent, "stale", APPROVE)  # plain
    second = only_interrupt(out)
    assert action(second)["args"] == {"a": 2, "b": 0}
    out = await resume(agent, "stale", {second.id: APPROVE})  # keyed by interrupt id
    third = only_interrupt(out)
    assert action(third)["args"] == {"a": 3, "b": 0}
    out = await resume(agent, "stale", {third.id: reject("no")})
    (message,) = tool_messages(out.value)
    assert message.status == "error"
    assert "PermissionError: test.add was rejected: no" in text_of(message)


@pytest.mark.parametrize("mode", ["per_call", "batched"])
async def test_works_next_to_human_in_the_loop_middleware_gating_execute_code(
    idle_executor: CodeExecutor, mode: Any
) -> None:
    hitl = HumanInTheLoopMiddleware(
        interrupt_on={"execute_code": {"allowed_decisions": ["approve", "reject"]}}, interrupt_mode=mode
    )
    code = "from mcptools.test import add\nprint(add(a=5, b=5), add(a=6, b=6))"
    _, agent = make_agent([hitl, CodeActionMiddleware(idle_executor)], run_code_then_finish(code))
    thread = f"hitl-{mode}"
    gate = only_interrupt(await agent.ainvoke(user(), config(thread), version="v2"))
    if mode == "per_call":
        assert gate.value["type"] == "tool_approval" and gate.value["name"] == "execute_code"
        out = await resume(agent, thread, {gate.id: {"type": "approve"}})
    else:
        assert gate.value["action_requests"][0]["name"] == "execute_code"
        out = await resume(agent, thread, APPROVE)
    assert action(only_interrupt(out))["args"] == {"a": 5, "b": 5}
    out = await resume(agent, thread, APPROVE)
    assert action(only_interrupt(out))["args"] == {"a": 6, "b": 6}
    out = await resume(agent, thread, APPROVE)
    assert not out.interrupts
    assert text_of(tool_messages(out.value)[0]) == "10 12"


async def test_rejecting_execute_code_itself_never_starts_the_code(idle_executor: CodeExecutor) -> None:
    hitl = HumanInTheLoopMiddleware(interrupt_on={"execute_code": True}, interrupt_mode="per_call")
    _, agent = make_agent(
        [hitl, CodeActionMiddleware(idle_executor)], run_code_then_finish("never_ran = True")
    )
    gate = only_interrupt(await agent.ainvoke(user(), config("hitl-reject"), version="v2"))
    out = await agent.ainvoke(
        Command(resume={gate.id: {"type": "reject"}}), config("hitl-reject"), version="v2"
    )
    assert tool_messages(out.value)[0].status == "error"
    assert await kernel_value(idle_executor, "never_ran") == "None"


async def test_shell_approval_and_an_answer_given_after_the_approval_timeout(tmp_path: Path) -> None:
    # The executor's approval_timeout rejects the request while the graph waits; the late answer must
    # not be lost in the void: the model gets what the code did after the timeout.
    code = "!echo from-shell\nprint('after the shell command')"
    async with CodeExecutor(workspace=tmp_path, approve_shell=True, approval_timeout=0.3) as executor:
        middleware = CodeActionMiddleware(executor, allowed_decisions=["approve", "edit", "reject"])
        _, agent = make_agent([middleware], run_code_then_finish(code))
        interrupt = only_interrupt(await agent.ainvoke(user(), config("late"), version="v2"))
        assert action(interrupt)["name"] == "shell"
        assert action(interrupt)["args"] == {"command": "echo from-shell"}
        assert interrupt.value["review_configs"][0]["allowed_decisions"] == ["approve", "reject"]  # no edit
        for _ in range(200):  # the timeout rejects the command and the code runs to its end
            if not executor.busy:
                break
            await asyncio.sleep(0.05)
        out = await resume(agent, "late", APPROVE)
        (message,) = tool_messages(out.value)
        text = text_of(message)
        assert "approval timed out" in text and "after the shell command" in text
        assert "from-shell\n" not in text


async def test_cancel_suspended_cancels_one_thread_or_all(idle_executor: CodeExecutor) -> None:
    middleware = CodeActionMiddleware(idle_executor)
    _, agent = make_agent([middleware], run_code_then_finish(TWO_STEPS.format(marker="cancel_mw")))
    only_interrupt(await agent.ainvoke(user(), config("cancel-me"), version="v2"))
    assert middleware.suspended == 1 and idle_executor.busy

    assert await middleware.cancel_suspended(thread_id="another-thread") == 0
    assert middleware.suspended == 1
    assert await middleware.cancel_suspended(thread_id="cancel-me") == 1

    assert middleware.suspended == 0 and not idle_executor.busy
    assert await kernel_value(idle_executor, "cancel_mw") == "started"


async def server_count(executor: CodeExecutor) -> int:
    """The test server's counter after one more call (each call increments it)."""
    result = await executor.execute("from mcptools.test import count\nprint(count())", approve_all=True)
    return int(result.text.strip())


async def test_a_resume_without_an_answer_asks_again_and_never_runs_the_call(
    idle_executor: CodeExecutor,
) -> None:
    # ainvoke(None) re-runs the interrupted tool call; LangGraph hands it the earlier, consumed plain
    # answer again (langgraph#8837). The pending call must be asked again, not approved with it.
    code = "from mcptools.test import add, count\nadd(a=1, b=0)\nafter_none = count()\nprint(after_none)"
    before = await server_count(idle_executor)
    _, agent = make_agent([CodeActionMiddleware(idle_executor)], run_code_then_finish(code))
    only_interrupt(await agent.ainvoke(user(), config("none-resume"), version="v2"))
    second = only_interrupt(await resume(agent, "none-resume", APPROVE))  # plain answer to add()
    assert action(second)["name"] == "test.count"

    again = only_interrupt(await agent.ainvoke(None, config("none-resume"), version="v2"))
    assert action(again)["name"] == "test.count"  # asked again, not answered with the stale approval
    again = only_interrupt(await agent.ainvoke(None, config("none-resume"), version="v2"))
    assert action(again)["name"] == "test.count"

    out = await resume(agent, "none-resume", reject("no decision was given before"))
    (message,) = tool_messages(out.value)
    assert "PermissionError" in text_of(message)
    assert await server_count(idle_executor) == before + 1  # count() never ran for the agent
