"""CodeActionMiddleware over ipybox_core Sessions: one kernel per LangGraph thread (real kernels)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from langchain_core.messages import AIMessage, BaseMessage
from lc_kit import (
    APPROVE,
    action,
    config,
    make_agent,
    only_interrupt,
    resume,
    text_of,
    tool_call,
    tool_messages,
    user,
)

from example_runner import run_example
from ipybox_core.sessions import Sessions
from ipybox_integrations.langchain import CodeActionMiddleware, execute_code_tool
from servers import PYTHON, SERVE_SCRIPT

pytestmark = pytest.mark.asyncio(loop_scope="package")

SERVERS = {"test": {"command": PYTHON, "args": [str(SERVE_SCRIPT), "stdio"]}}
RESTARTED = "the Python kernel of this conversation was restarted"


@pytest_asyncio.fixture(loop_scope="package", scope="module")
async def sessions(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Sessions]:
    """Sessions with the test MCP server (every call needs approval); each test uses its own threads."""
    async with Sessions(root=tmp_path_factory.mktemp("lc-sessions"), warm=0, mcp_servers=SERVERS) as made:
        yield made


def run_the_message(messages: list[BaseMessage]) -> AIMessage:
    """On a human turn: execute_code with the message as code (always call id ``call_1``); then 'done'."""
    if messages[-1].type == "tool":
        return AIMessage(content="done")
    return AIMessage(content="", tool_calls=[tool_call(messages[-1].text)])


async def turn(agent: Any, thread_id: str, code: str) -> str:
    """One turn of ``thread_id`` without approvals; the text of its tool result."""
    out = await agent.ainvoke(user(code), config(thread_id), version="v2")
    assert not out.interrupts
    return text_of(tool_messages(out.value)[-1])


async def test_threads_in_parallel_have_their_own_kernels(sessions: Sessions) -> None:
    _, agent = make_agent([CodeActionMiddleware(sessions)], run_the_message)

    async def thread(name: str) -> str:
        await turn(agent, name, f"import asyncio\nmine = {name!r}\nawait asyncio.sleep(0.3)")
        return await turn(agent, name, "print(globals().get('mine'))")

    assert list(await asyncio.gather(thread("par-a"), thread("par-b"))) == ["par-a", "par-b"]
    assert {"par-a", "par-b"} <= set(sessions.keys())


async def test_a_thread_waiting_for_approval_does_not_block_another(sessions: Sessions) -> None:
    middleware = CodeActionMiddleware(sessions)
    _, agent = make_agent([middleware], run_the_message)
    waiting = "from mcptools.test import add\nprint(add(a=1, b=1))"
    only_interrupt(await agent.ainvoke(user(waiting), config("wait-a"), version="v2"))

    assert await turn(agent, "wait-b", "print(40 + 2)") == "42"  # not "busy"

    out = await resume(agent, "wait-a", APPROVE)
    assert text_of(tool_messages(out.value)[-1]) == "2"
    assert middleware.suspended == 0


async def test_the_same_tool_call_id_in_two_threads_keeps_their_executions_apart(sessions: Sessions) -> None:
    _, agent = make_agent([CodeActionMiddleware(sessions)], run_the_message)
    first = only_interrupt(await agent.ainvoke(user(add_code(1, 1)), config("id-a"), version="v2"))
    second = only_interrupt(await agent.ainvoke(user(add_code(2, 3)), config("id-b"), version="v2"))
    assert action(first)["args"] == {"a": 1, "b": 1}
    assert action(second)["args"] == {"a": 2, "b": 3}

    out_b = await resume(agent, "id-b", APPROVE)
    out_a = await resume(agent, "id-a", APPROVE)
    assert text_of(tool_messages(out_b.value)[-1]) == "5"
    assert text_of(tool_messages(out_a.value)[-1]) == "2"


async def test_new_input_cancels_only_its_own_threads_waiting_execution(sessions: Sessions) -> None:
    middleware = CodeActionMiddleware(sessions)
    _, agent = make_agent([middleware], run_the_message)
    only_interrupt(await agent.ainvoke(user(add_code(1, 2)), config("move-a"), version="v2"))
    only_interrupt(await agent.ainvoke(user(add_code(3, 4)), config("move-b"), version="v2"))
    assert middleware.suspended == 2

    assert await turn(agent, "move-a", "print('moved on')") == "moved on"  # cancels move-a's wait
    assert middleware.suspended == 1
    out = await resume(agent, "move-b", APPROVE)
    assert text_of(tool_messages(out.value)[-1]) == "7"


async def test_a_closed_sessions_next_result_starts_with_the_restart_notice_after_approvals(
    sessions: Sessions,
) -> None:
    _, agent = make_agent([CodeActionMiddleware(sessions)], run_the_message)
    await turn(agent, "closed", "x = 1")
    await sessions.close_session("closed")

    only_interrupt(await agent.ainvoke(user(add_code(1, 1)), config("closed"), version="v2"))
    out = await resume(agent, "closed", APPROVE)  # the tool is entered again: the notice is kept
    text = text_of(tool_messages(out.value)[-1])
    assert text.startswith(RESTARTED) and "closed by the application" in text
    assert text.endswith("\n\n2")
    assert await turn(agent, "closed", "print(globals().get('x'))") == "None"  # said once


async def test_an_idle_reaped_sessions_next_result_starts_with_the_restart_notice(tmp_path: Path) -> None:
    async with Sessions(root=tmp_path, warm=0, idle_timeout=0.3) as short_lived:
        _, agent = make_agent([CodeActionMiddleware(short_lived)], run_the_message)
        await turn(agent, "idle", "x = 1")
        for _ in range(100):
            if not short_lived.live:
                break
            await asyncio.sleep(0.1)
        text = await turn(agent, "idle", "print(globals().get('x'))")
    assert text.startswith(RESTARTED) and "after 0.3 s idle" in text
    assert text.endswith("\n\nNone")


async def test_the_plain_tool_outside_a_graph_uses_the_default_session(sessions: Sessions) -> None:
    tool = execute_code_tool(sessions)
    await tool.ainvoke({"code": "y = 1"})
    assert "default" in set(sessions.keys())
    await sessions.close_session("default")
    text = text_of_content(await tool.ainvoke({"code": "print(globals().get('y'))"}))
    assert text.startswith(RESTARTED) and text.endswith("\n\nNone")


async def test_the_prompt_lists_the_tools_of_the_sessions(sessions: Sessions) -> None:
    section = CodeActionMiddleware(sessions).prompt_section()
    assert "def add(" in section and "No MCP tools" not in section


def add_code(a: int, b: int) -> str:
    return f"from mcptools.test import add\nprint(add(a={a}, b={b}))"


def text_of_content(content: object) -> str:
    assert isinstance(content, list)
    return "".join(block.get("text", "") for block in content if isinstance(block, dict))


async def test_the_example_keeps_threads_apart_and_shows_the_notice() -> None:
    out = (await asyncio.to_thread(run_example, "langchain_sessions.py")).stdout.splitlines()
    assert out[:2] == ["alice: ['Structure and Interpretation of Computer Programs']", "bob: []"]
    assert out[2].startswith(f"bob: {RESTARTED} (it was closed by the application)")
    assert out[-1] == "False"
