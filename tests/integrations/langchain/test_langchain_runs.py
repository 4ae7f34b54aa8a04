"""Traces through LangChain callbacks: each MCP call the code sends is a child tool run of the
``execute_code`` run, with its arguments and the MCP tool's result, as a native tool's run is."""

from __future__ import annotations

from typing import Any
from uuid import UUID

import pytest
from langchain_core.callbacks import AsyncCallbackHandler
from langgraph.types import Command
from lc_kit import APPROVE, config, make_agent, only_interrupt, reject, run_code_then_finish, user

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


class ToolRuns(AsyncCallbackHandler):
    """Records every tool run: name, parent, inputs, output or error."""

    def __init__(self) -> None:
        self.runs: dict[UUID, dict[str, Any]] = {}

    async def on_tool_start(
        self,
        serialized: dict[str, Any],
        input_str: str,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        self.runs[run_id] = {
            "name": serialized.get("name"),
            "parent": parent_run_id,
            "inputs": kwargs.get("inputs"),
        }

    async def on_tool_end(self, output: Any, *, run_id: UUID, **kwargs: Any) -> None:
        self.runs[run_id]["output"] = output

    async def on_tool_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self.runs[run_id]["error"] = type(error).__name__

    def named(self, name: str) -> list[dict[str, Any]]:
        return [run for run in self.runs.values() if run["name"] == name]


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
