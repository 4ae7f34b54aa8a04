"""The agent's own MCP servers (``Agent(mcp_servers=[...])``) called from the code (issue 24): a
real ``MCPServerStdio`` running the test MCP server, a scripted model, a real kernel."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, RunContextWrapper, RunState, ToolApprovalItem, function_tool
from agents.agent import MCPConfig
from agents.mcp import MCPServerStdio, create_static_tool_filter
from agents.testing import ScriptedModel
from agents.tool import ToolOriginType, get_function_tool_origin
from oa_kit import call_summary, output_text, run_to_end, scripted, tool_outputs

from ipybox_core import ApprovalRules, CodeExecutor
from ipybox_integrations.openai_agents import CodeActionTool
from servers import PYTHON, SERVE_SCRIPT

pytestmark = pytest.mark.asyncio(loop_scope="package")


def shop_server(**options: Any) -> MCPServerStdio:
    """The test MCP server as the agent's own server ``shop`` (the SDK's stdio client)."""
    return MCPServerStdio({"command": PYTHON, "args": [str(SERVE_SCRIPT), "stdio"]}, name="shop", **options)


@asynccontextmanager
async def connected(**options: Any) -> AsyncIterator[MCPServerStdio]:
    async with shop_server(**options) as server:
        yield server


@function_tool
def whoami(ctx: RunContextWrapper[dict[str, str]]) -> dict[str, str]:
    """The signed-in user."""
    return {"user": ctx.context["user"]}


def clerk(code: CodeActionTool, model: ScriptedModel, servers: list[Any], tools: list[Any]) -> Agent[Any]:
    return Agent(
        name="clerk",
        instructions=code.instructions("You are a clerk."),
        tools=[code, *tools],
        mcp_servers=servers,
        model=model,
    )


async def test_an_mcp_tool_of_the_agent_and_a_function_tool_in_one_cell(idle_executor: CodeExecutor) -> None:
    cell = (
        "from agent_tools import add, echo, fail, image, stats, whoami\n"
        "from ipybox_core.errors import ToolError\n"
        "print(add(a=2, b=3), whoami())\n"
        "print(repr(echo(message='hi')))\n"
        "s = stats(values=[1.0, 2.0, 6.0])\n"
        "print(type(s).__name__, s.mean, s.maximum)\n"
        "blocks = image(width=2, height=2)\n"
        "print([b['type'] for b in blocks], blocks[0]['text'], blocks[1]['mimeType'])\n"
        "try:\n    fail()\nexcept ToolError as e:\n    print('failed:', e)\n"
    )
    code = CodeActionTool(idle_executor)
    model = scripted(cell)
    async with connected() as shop:
        result, seen = await run_to_end(clerk(code, model, [shop], [whoami]), context={"user": "carol"})
    # the executor asks for every call; the server's require_approval (unset: never) lets them through
    assert seen == []
    assert output_text(tool_outputs(model)[0]).splitlines() == [
        "5 {'user': 'carol'}",
        "'hi'",
        "Stats 3.0 6.0",  # structured content as a typed model, from the tool's output schema
        "['text', 'image'] red 2x2 image/png",  # more than text: the content blocks
        "failed: Error executing tool fail: the widget is broken",  # an error result's text
    ]
    assert result.final_output == "done" and not idle_executor.busy
    instructions = str(model.calls[0].system_instructions)
    assert "def add(*, a: int, b: int) -> int:" in instructions  # in the API reference, typed


async def test_the_servers_require_approval_interrupts_the_run(idle_executor: CodeExecutor) -> None:
    code = CodeActionTool(idle_executor)
    model = scripted(
        "from agent_tools import count, echo\n"
        "for tag in ('a', 'b'):\n"
        "    try:\n        print(count(tag=tag))\n    except PermissionError as e:\n        print('no:', e)\n"
        "print(echo(message='unasked'), count(tag='b'))\n"
    )

    def decide(state: RunState[Any], item: ToolApprovalItem) -> None:
        if item.arguments and '"a"' in item.arguments:
            state.reject(item, rejection_message="not a")
        else:
            state.approve(item)

    async with connected(require_approval={"always": {"tool_names": ["count"]}}) as shop:
        _, seen = await run_to_end(clerk(code, model, [shop], []), decide=decide)
    # like the SDK's own approval of the server's tool: count asks every time, echo never
    assert call_summary(seen) == [
        ("agent_tools", "count", {"tag": "a"}),
        ("agent_tools", "count", {"tag": "b"}),
        ("agent_tools", "count", {"tag": "b"}),
    ]
    assert [code.describe(item) for item in seen[:1]] == ["The code calls the agent's tool count(tag='a')"]
    lines = output_text(tool_outputs(model)[0]).splitlines()
    assert lines[0].startswith("no:") and "not a" in lines[0]
    assert lines[1:] == ["1", "unasked 2"]  # the rejected call never reached the server


async def test_an_allow_read_only_rule_does_not_skip_the_servers_approval(tmp_path: Path) -> None:
    cell = "from agent_tools import add, stats\nprint(add(a=1, b=2), stats(values=[2.0]).mean)"
    async with CodeExecutor(workspace=tmp_path, approval=ApprovalRules(allow_read_only=True)) as executor:
        asked: list[list[Any]] = []
        for require in ({"always": {"tool_names": ["add"]}}, "never"):  # the attack, then the control
            code = CodeActionTool(executor)
            model = scripted(cell)
            async with connected(require_approval=require) as shop:
                _, seen = await run_to_end(clerk(code, model, [shop], []))
            asked.append(call_summary(seen))
            assert output_text(tool_outputs(model)[0]) == "3 2.0"
    # both tools are read-only-hinted: the rule lets stats through, never the add the server guards
    assert asked == [[("agent_tools", "add", {"a": 1, "b": 2})], []]


async def test_selections_and_the_servers_tool_filter(idle_executor: CodeExecutor) -> None:
    listing = "import agent_tools\nprint(sorted(agent_tools.__all__))"

    @function_tool
    def add(a: int, b: int) -> str:
        """The agent's own add, named like the server's."""
        return f"own {a + b}"

    async def listed(selection: Any, tools: list[Any], cell: str = listing, **options: Any) -> str:
        code = CodeActionTool(idle_executor, agent_tools=selection)
        model = scripted(cell)
        async with connected(**options) as shop:
            await run_to_end(clerk(code, model, [shop], tools), context={"user": "carol"})
        return output_text(tool_outputs(model)[0])

    only_two = create_static_tool_filter(allowed_tool_names=["add", "echo"])
    assert await listed(None, [whoami], tool_filter=only_two) == "['add', 'echo', 'whoami']"
    assert await listed(["whoami"], [whoami]) == "['whoami']"

    def not_mcp(tool: Any) -> bool:
        origin = get_function_tool_origin(tool)
        return origin is None or origin.type != ToolOriginType.MCP

    assert await listed(not_mcp, [whoami]) == "['whoami']"
    # a name both use: the function tool keeps it, the MCP tool's is numbered
    both = "from agent_tools import add, add_2\nprint(add(a=1, b=2), add_2(a=1, b=2))"
    assert await listed(None, [add], both, tool_filter=only_two) == "own 3 3"


async def test_the_agents_mcp_config_names_the_tools_and_formats_their_failures(
    idle_executor: CodeExecutor,
) -> None:
    cell = (
        "from agent_tools import {add}, {fail}\nfrom ipybox_core.errors import ToolError\n"
        "print({add}(a=1, b=2))\n"
        "try:\n    {fail}(kind='protocol')\nexcept ToolError as e:\n    print(type(e).__name__, e)\n"
    )
    prefixed: MCPConfig = {"include_server_in_tool_names": True, "failure_error_function": None}
    outputs = []
    for config, add, fail in (
        (MCPConfig(), "add", "fail"),  # the SDK's default formatter hides the failure
        (prefixed, "mcp_shop__add", "mcp_shop__fail"),  # the SDK's prefixed names, the raw message
    ):
        code = CodeActionTool(idle_executor)
        model = scripted(cell.format(add=add, fail=fail))
        async with connected() as shop:
            agent = clerk(code, model, [shop], [])
            agent.mcp_config = config
            await run_to_end(agent)
        outputs.append(output_text(tool_outputs(model)[0]).splitlines())
    assert outputs[0] == ["3", "ToolError An error occurred while running the tool. Please try again."]
    assert outputs[1][0] == "3"
    assert outputs[1][1].startswith("ToolError ") and "rejected at protocol level" in outputs[1][1]


async def test_a_server_that_is_not_connected_is_a_tool_error(idle_executor: CodeExecutor) -> None:
    shop = shop_server()

    @function_tool
    async def close_shop() -> str:
        """Close the shop's connection (as an application shutting down would)."""
        await shop.cleanup()
        return "closed"

    @function_tool
    async def open_shop() -> str:
        """Connect the shop again."""
        await shop.connect()
        return "open"

    code = CodeActionTool(idle_executor)
    model = scripted(
        "from agent_tools import add, close_shop, open_shop\nfrom ipybox_core.errors import ToolError\n"
        "print(add(a=1, b=1), close_shop())\n"
        "try:\n    add(a=2, b=2)\nexcept ToolError as e:\n    print(type(e).__name__, e)\n"
        "print(open_shop(), add(a=3, b=3))\n"
    )
    await shop.connect()
    try:
        result, _ = await run_to_end(clerk(code, model, [shop], [close_shop, open_shop]))
    finally:
        await shop.cleanup()
    assert output_text(tool_outputs(model)[0]).splitlines() == [
        "2 closed",
        "ToolError the agent's MCP server 'shop' is not connected: open it around the run "
        "(async with server: ... Runner.run(agent, ...)), as the Agents SDK requires",
        "open 6",  # the calls use the server object's connection, whichever it is now
    ]
    assert result.final_output == "done" and not idle_executor.busy
