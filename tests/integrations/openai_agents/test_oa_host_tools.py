"""The agent's own function tools called from the code (issue 24), in the SDK's terms: a scripted
model, a real kernel, the test MCP server; approvals are the SDK's own interruptions."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from agents import (
    Agent,
    RunContextWrapper,
    RunState,
    ToolApprovalItem,
    ToolGuardrailFunctionOutput,
    ToolInputGuardrailData,
    ToolOutputGuardrailData,
    function_tool,
    tool_input_guardrail,
    tool_output_guardrail,
)
from agents.testing import ScriptedModel
from oa_kit import call_summary, output_text, run_to_end, scripted, tool_outputs

from example_runner import run_example
from ipybox_core import CodeExecutor
from ipybox_core.hosttools import HostCall, HostTool
from ipybox_core.sessions import Sessions
from ipybox_integrations.openai_agents import CodeActionTool
from servers.agent_tools_cells import CALLS_CELL as CELL

pytestmark = pytest.mark.asyncio(loop_scope="package")


def clerk_tools(refunded: list[str]) -> list[Any]:
    @function_tool(needs_approval=True)
    def refund(order: str) -> str:
        """Refund an order."""
        refunded.append(order)
        return f"refunded {order}"

    @function_tool
    def whoami(ctx: RunContextWrapper[dict[str, str]]) -> dict[str, str]:
        """The signed-in user."""
        return {"user": ctx.context["user"]}

    @function_tool
    def lookup(order: str) -> dict[str, str]:
        """Look an order up."""
        raise ValueError(f"no order {order}")

    return [refund, whoami, lookup]


def clerk(code: CodeActionTool, model: ScriptedModel, tools: list[Any]) -> Agent[Any]:
    return Agent(
        name="clerk", instructions=code.instructions("You are a clerk."), tools=[code, *tools], model=model
    )


async def test_three_agent_tools_and_an_mcp_tool_in_one_cell(idle_executor: CodeExecutor) -> None:
    refunded: list[str] = []
    code = CodeActionTool(idle_executor)
    model = scripted(CELL)
    agent = clerk(code, model, clerk_tools(refunded))

    result, seen = await run_to_end(agent, context={"user": "carol"})

    # only the tool that needs approval under its own setting, and the MCP call, interrupt the run
    assert call_summary(seen) == [
        ("agent_tools", "refund", {"order": "A-1"}),
        ("agent_tools", "refund", {"order": "A-2"}),
        ("test", "add", {"a": 20, "b": 22}),
    ]
    assert all(code.owns(item) for item in seen)
    assert refunded == ["A-1", "A-2"]
    assert output_text(tool_outputs(model)[0]).splitlines() == [
        "{'user': 'carol'}",
        "error: An error occurred while running the tool. Please try again.",  # the SDK's default
        "refunded A-1",
        "refunded A-2",
        "42",
    ]
    assert result.final_output == "done" and not idle_executor.busy


async def test_the_prompt_lists_the_agent_tools(idle_executor: CodeExecutor) -> None:
    code = CodeActionTool(idle_executor)
    model = scripted("print(1)")
    agent = clerk(code, model, clerk_tools([]))
    await run_to_end(agent, context={"user": "carol"})
    instructions = str(model.calls[0].system_instructions)
    assert "# from agent_tools import ...\ndef lookup(*, order: str) -> dict[str, str]:" in instructions
    assert "def whoami() -> dict[str, str]:" in instructions  # the context parameter is the SDK's


async def test_a_rejected_agent_tool_call_does_not_run(idle_executor: CodeExecutor) -> None:
    refunded: list[str] = []
    code = CodeActionTool(idle_executor)
    model = scripted(
        "from agent_tools import refund\ntry:\n    refund(order='B-1')\nexcept PermissionError as e:\n    print('no:', e)"
    )
    agent = clerk(code, model, clerk_tools(refunded))

    described: list[str] = []

    def reject(state: RunState[Any], item: ToolApprovalItem) -> None:
        described.append(code.describe(item))
        state.reject(item, rejection_message="not today")

    _, seen = await run_to_end(agent, decide=reject, context={"user": "carol"})

    assert call_summary(seen) == [("agent_tools", "refund", {"order": "B-1"})]
    assert described == ["The code calls the agent's tool refund(order='B-1')"]
    assert refunded == []
    assert "not today" in output_text(tool_outputs(model)[0])


async def test_the_failure_error_function_makes_the_message(idle_executor: CodeExecutor) -> None:
    @function_tool(failure_error_function=None)
    def lookup(order: str) -> str:
        """Look an order up."""
        raise LookupError(f"no order {order}")

    @function_tool(failure_error_function=lambda ctx, error: f"find failed ({error})")
    def find(order: str) -> str:
        """Find an order."""
        raise LookupError(f"no order {order}")

    code = CodeActionTool(idle_executor)
    model = scripted(
        "from agent_tools import find, lookup\nfrom ipybox_core.errors import ToolError\n"
        "for tool in (lookup, find):\n    try:\n        tool(order='C-3')\n"
        "    except ToolError as e:\n        print(type(e).__name__, e)"
    )
    await run_to_end(clerk(code, model, [lookup, find]))
    assert output_text(tool_outputs(model)[0]).splitlines() == [
        "ToolError no order C-3",
        "ToolError find failed (no order C-3)",
    ]


async def test_selection_and_opt_out(idle_executor: CodeExecutor) -> None:
    tools = clerk_tools([])
    code = CodeActionTool(idle_executor, agent_tools=["whoami"])
    model = scripted(
        "import agent_tools\nprint(sorted(agent_tools.__all__))", "from agent_tools import refund"
    )
    await run_to_end(clerk(code, model, tools), context={"user": "carol"})
    outputs = [output_text(o) for o in tool_outputs(model)]
    assert outputs[0] == "['whoami']"
    assert "ImportError" in outputs[1]

    code = CodeActionTool(idle_executor, agent_tools=False)
    model = scripted("import agent_tools")
    await run_to_end(clerk(code, model, tools), context={"user": "carol"})
    assert "ModuleNotFoundError" in output_text(tool_outputs(model)[0])


async def test_the_applications_own_host_tools_stay_beside_the_agents(idle_executor: CodeExecutor) -> None:
    async def version(call: HostCall) -> str:
        return "v7"

    await idle_executor.register_host_tools([HostTool("version", version, "The app's version.")])
    try:
        code = CodeActionTool(idle_executor)
        model = scripted("from agent_tools import version, whoami\nprint(version(), whoami())")
        await run_to_end(clerk(code, model, clerk_tools([])), context={"user": "carol"})
        assert output_text(tool_outputs(model)[0]).strip() == "v7 {'user': 'carol'}"
        assert {tool.name for tool in idle_executor.host_tools} == {"version", "refund", "whoami", "lookup"}
    finally:
        await idle_executor.register_host_tools([])


async def test_the_audit_log_says_which_calls_their_tools_let_through(tmp_path: Path) -> None:
    audit = tmp_path / "audit.jsonl"
    async with CodeExecutor(workspace=tmp_path / "ws", audit_log=audit) as executor:
        code = CodeActionTool(executor)
        model = scripted("from agent_tools import whoami, refund\nprint(whoami(), refund(order='A-1'))")
        await run_to_end(clerk(code, model, clerk_tools([])), context={"user": "carol"})
    records = [json.loads(line) for line in audit.read_text().splitlines()]
    decided = [(r["tool"], r["decided_by"]) for r in records if "decided_by" in r]
    assert decided == [("whoami", "tool:no-approval"), ("refund", "user")]  # refund was asked


async def test_a_needs_approval_callable_decides_per_call_over_sessions(tmp_path: Path) -> None:
    refunded: list[tuple[str, str, int]] = []

    async def big(ctx: RunContextWrapper[Any], params: dict[str, Any], call_id: str) -> bool:
        return bool(params["amount"] > 100)

    @function_tool(needs_approval=big)
    def refund(ctx: RunContextWrapper[dict[str, str]], order: str, amount: int) -> str:
        """Refund part of an order."""
        refunded.append((ctx.context["user"], order, amount))
        return f"refunded {amount}"

    cell = "from agent_tools import refund\nfor amount in (5, 500, 7):\n    print(refund(order='D-4', amount=amount))"
    async with Sessions(root=tmp_path, warm=0, approval="always") as sessions:
        code = CodeActionTool(sessions, key=lambda ctx: ctx.context["user"])
        model = scripted(cell)
        _, seen = await run_to_end(clerk(code, model, [refund]), context={"user": "erin"})
    assert call_summary(seen) == [("agent_tools", "refund", {"order": "D-4", "amount": 500})]
    assert refunded == [("erin", "D-4", 5), ("erin", "D-4", 500), ("erin", "D-4", 7)]
    assert output_text(tool_outputs(model)[0]).split() == [
        "refunded",
        "5",
        "refunded",
        "500",
        "refunded",
        "7",
    ]


async def test_the_example_runs_offline() -> None:
    done = await asyncio.to_thread(run_example, "openai_agents_own_tools.py", "--offline", "--yes")
    out = done.stdout
    assert out.splitlines() == [
        "approve agent_tools.refund(order_id='ord-1', amount_usd=30)? [y/N] y (auto)",
        "approve agent_tools.refund(order_id='ord-3', amount_usd=8.5)? [y/N] y (auto)",
        "refunded 30.00 USD for ord-1 (27.60 EUR)",
        "refunded 8.50 USD for ord-3 (7.82 EUR)",
        "skipped: order_status failed: no order ord-9",
        "Done.",
    ]


async def test_the_tools_guardrails_apply_to_calls_from_the_code(idle_executor: CodeExecutor) -> None:
    ran: list[str] = []

    @tool_input_guardrail
    def no_vip(data: ToolInputGuardrailData) -> ToolGuardrailFunctionOutput:
        if "VIP" in data.context.tool_arguments:
            return ToolGuardrailFunctionOutput.reject_content("VIP orders are handled by a human")
        return ToolGuardrailFunctionOutput.allow()

    @tool_output_guardrail
    def no_secrets(data: ToolOutputGuardrailData) -> ToolGuardrailFunctionOutput:
        if "secret" in str(data.output):
            return ToolGuardrailFunctionOutput.raise_exception()
        return ToolGuardrailFunctionOutput.allow()

    @function_tool(tool_input_guardrails=[no_vip], tool_output_guardrails=[no_secrets])
    def lookup(order: str) -> str:
        """Look an order up."""
        ran.append(order)
        return f"{order}: secret" if order == "S-1" else f"{order}: ok"

    code = CodeActionTool(idle_executor)
    model = scripted(
        "from agent_tools import lookup\nfrom ipybox_core.errors import ToolError\n"
        "for order in ('A-1', 'VIP-1', 'S-1'):\n    try:\n        print(lookup(order=order))\n"
        "    except ToolError as e:\n        print('ToolError', e)"
    )
    await run_to_end(clerk(code, model, [lookup]))
    assert output_text(tool_outputs(model)[0]).splitlines() == [
        "A-1: ok",
        "ToolError VIP orders are handled by a human",
        "ToolError guardrail 'no_secrets' of tool 'lookup' stopped the call",
    ]
    assert ran == ["A-1", "S-1"]  # an input guardrail's refusal never runs the tool


async def test_optional_parameters_stay_optional_in_the_code(idle_executor: CodeExecutor) -> None:
    @function_tool
    def search(query: str, limit: int = 2, tag: str | None = None) -> list[str]:
        """Search orders."""
        return [f"{query}-{i}-{tag}" for i in range(limit)]

    code = CodeActionTool(idle_executor)
    model = scripted(
        "from agent_tools import search\nprint(search(query='q'), search(query='r', limit=1, tag='t'))"
    )
    await run_to_end(clerk(code, model, [search]))
    assert output_text(tool_outputs(model)[0]) == "['q-0-None', 'q-1-None'] ['r-0-t']"
