"""An existing OpenAI Agents SDK agent made code-acting: its own function tools become Python functions.

    python examples/openai_agents_own_tools.py            # a real model (needs OPENAI_API_KEY)
    python examples/openai_agents_own_tools.py --offline  # a scripted model, no network
    python examples/openai_agents_own_tools.py --yes      # approve every call automatically

The agent already has three function tools: ``refund`` (``needs_approval=True``), ``whoami`` (reads
the run's context) and ``order_status`` (raises for an unknown order). Adding ``CodeActionTool``
gives the code ``from agent_tools import refund, whoami, order_status`` next to the demo shop's MCP
tools; one code block calls them all in a loop. ``refund`` asks through the SDK's own
interruptions, exactly like an MCP call the executor's rules leave to you.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
from typing import Any

from agents import Agent, RunContextWrapper, Runner, function_tool, set_tracing_disabled
from agents.testing import ScriptedModel, assistant_message, function_call

from ipybox_core import ApprovalRules, CodeExecutor, ask_approval
from ipybox_integrations.openai_agents import CodeActionTool

DEMO_SERVER = {"command": sys.executable, "args": ["-m", "ipybox_core.demo.server"]}
TASK = "Refund every delivered order of mine, in EUR terms."
ORDERS = {"ord-1": ("delivered", 30.0), "ord-2": ("shipped", 12.0), "ord-3": ("delivered", 8.5)}


# --8<-- [start:tools]
@function_tool(needs_approval=True)
def refund(order_id: str, amount_usd: float) -> str:
    """Refund an order (moves money: needs approval)."""
    return f"refunded {amount_usd:.2f} USD for {order_id}"


@function_tool
def whoami(ctx: RunContextWrapper[dict[str, Any]]) -> dict[str, Any]:
    """The signed-in customer and their order ids."""
    return {"customer": ctx.context["customer"], "orders": [*sorted(ORDERS), "ord-9"]}


@function_tool(failure_error_function=lambda ctx, error: f"order_status failed: {error}")
def order_status(order_id: str) -> dict[str, Any]:
    """Status and total (USD) of one order."""
    if order_id not in ORDERS:
        raise LookupError(f"no order {order_id}")
    status, total = ORDERS[order_id]
    return {"status": status, "total_usd": total}


# --8<-- [end:tools]


CODE = """\
from agent_tools import order_status, refund, whoami
from mcptools.shop import exchange_rate
from ipybox_core.errors import ToolError

eur = exchange_rate(currency="EUR")
me = whoami()
for order_id in me["orders"]:
    try:
        order = order_status(order_id=order_id)
    except ToolError as error:
        print(f"skipped: {error}")
        continue
    if order["status"] == "delivered":
        print(refund(order_id=order_id, amount_usd=order["total_usd"]),
              f"({order['total_usd'] * eur:.2f} EUR)")
"""


def offline_model() -> ScriptedModel:
    return ScriptedModel(
        [
            [function_call("execute_code", {"code": CODE}, call_id="call_refunds")],
            [assistant_message("Done.")],
        ]
    )


async def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--offline", action="store_true", help="use a scripted model (no network)")
    parser.add_argument("--yes", action="store_true", help="approve every call automatically")
    parser.add_argument("--model", default=os.environ.get("OPENAI_MODEL", "gpt-4.1"), help="OpenAI model")
    args = parser.parse_args()
    offline = args.offline or not os.environ.get("OPENAI_API_KEY")
    if offline:
        set_tracing_disabled(True)  # the SDK exports traces to OpenAI by default
    auto = args.yes or not sys.stdin.isatty()

    with tempfile.TemporaryDirectory(prefix="ipybox-oa-tools-") as workspace:
        # --8<-- [start:agent]
        rules = ApprovalRules(allow_read_only=True)  # read-only MCP tools run without asking
        async with CodeExecutor(workspace=workspace, approval=rules) as executor:
            await executor.register_mcp_server("shop", DEMO_SERVER)
            code = CodeActionTool(executor)  # the one addition: the agent's tools reach the code
            agent = Agent(
                name="support",
                instructions=code.instructions("You are a customer support agent."),
                tools=[code, refund, whoami, order_status],
                model=offline_model() if offline else args.model,
            )
            context = {"customer": "carol"}
            result = await Runner.run(agent, TASK, context=context)
            while result.interruptions:
                state = result.to_state()
                for item in result.interruptions:  # agent tools: item.tool_namespace == "agent_tools"
                    request = code.request_for(item)
                    if request is not None and await ask_approval(request, auto=auto):
                        state.approve(item)
                    else:
                        state.reject(item, rejection_message="the user said no")
                result = await Runner.run(agent, state, context=context)
        # --8<-- [end:agent]
        for step in result.new_items:
            if step.type == "tool_call_output_item":
                print(step.output)
        print(result.final_output)
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
