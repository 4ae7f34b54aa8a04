"""Traces through LangChain callbacks: each MCP call the code sends is a child tool run of the
``execute_code`` run, with its arguments and the MCP tool's result, as a native tool's run is."""

from __future__ import annotations

from typing import Any

import pytest
from langgraph.types import Command
from lc_kit import APPROVE, ToolRuns, config, make_agent, only_interrupt, reject, run_code_then_finish, user

from ipybox_core import CodeExecutor
from ipybox_integrations.langchain import CodeActionMiddleware, execute_code_tool

pytestmark = pytest.mark.asyncio(loop_scope="package")

CODE = """\
from mcptools.test import add, echo
try:
    echo(message="not this")
except PermissionError:
    pass
print(add(a=2, b=3))
"""


async def test_an_approved_call_is_a_child_run_of_execute_code_with_the_mcp_result(
    idle_executor: CodeExecutor,
) -> None:
    runs = ToolRuns()
    _, agent = make_agent([CodeActionMiddleware(idle_executor)], run_code_then_finish(CODE))
    settings = {**config("traced"), "callbacks": [runs]}
    only_interrupt(await agent.ainvoke(user(), settings, version="v2"))
    only_interrupt(await agent.ainvoke(Command(resume=reject("no")), settings, version="v2"))
    await agent.ainvoke(Command(resume=APPROVE), settings, version="v2")

    (add,) = runs.named("test.add")
    assert runs.named("test.echo") == []  # rejected: it never ran, as a rejected native tool
    assert add["inputs"] == {"a": 2, "b": 3} and add["output"] == {"result": 5}
    parent = runs.runs[add["parent"]]
    assert parent["name"] == "execute_code" and "error" not in parent  # the run that got the answer


async def test_with_the_approval_callback_too(idle_executor: CodeExecutor) -> None:
    runs = ToolRuns()

    async def approve(request: Any) -> Any:
        return APPROVE

    tool = execute_code_tool(idle_executor, approval_callback=approve)
    code = "from mcptools.test import echo\nprint(echo(message='called back'))"
    await tool.ainvoke(
        {"type": "tool_call", "name": "execute_code", "args": {"code": code}, "id": "cb"},
        {"callbacks": [runs]},
    )
    (echo,) = runs.named("test.echo")
    assert echo["output"] == "called back"
    assert runs.runs[echo["parent"]]["name"] == "execute_code"
