"""An existing PydanticAI agent made code-acting: its own tools become Python functions.

    python examples/pydantic_ai_own_tools.py            # a real model: OPENAI_API_KEY (or --model NAME)
    python examples/pydantic_ai_own_tools.py --offline  # a scripted model, no network
    python examples/pydantic_ai_own_tools.py --yes      # approve every call automatically

The agent already has three tools: ``refund`` (``requires_approval=True``), ``whoami`` (reads the
run's deps through ``RunContext``) and ``order_status`` (raises ``ModelRetry`` for an unknown
order). Adding the ``CodeAction`` capability gives the code ``from agent_tools import refund, whoami,
order_status`` next to the demo shop's MCP tools; one code block calls them all in a loop.
``refund`` asks through PydanticAI's own ``DeferredToolRequests``, exactly like an MCP call the
executor's rules leave to you.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from dataclasses import dataclass
from typing import Any

from pydantic_ai import (
    Agent,
    DeferredToolRequests,
    ModelMessage,
    ModelResponse,
    ModelRetry,
    RunContext,
    TextPart,
    ToolCallPart,
    ToolDenied,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from ipybox_core import ApprovalRules, ask_approval
from ipybox_integrations.pydantic_ai import CodeAction, pending_approvals

DEMO_SERVER = {"command": sys.executable, "args": ["-m", "ipybox_core.demo.server"]}
TASK = "Refund every delivered order of mine, in EUR terms."
ORDERS = {"ord-1": ("delivered", 30.0), "ord-2": ("shipped", 12.0), "ord-3": ("delivered", 8.5)}


@dataclass
class Customer:
    name: str


# --8<-- [start:tools]
code_action = CodeAction(  # the one addition: the agent's own tools reach the code
    mcp_servers={"shop": DEMO_SERVER},
    approval=ApprovalRules(allow_read_only=True),  # read-only MCP tools run without asking
)
support = Agent(
    instructions="You are a customer support agent.",
    deps_type=Customer,
    output_type=[str, DeferredToolRequests],
    capabilities=[code_action],
)


@support.tool_plain(requires_approval=True)
def refund(order_id: str, amount_usd: float) -> str:
    """Refund an order (moves money: needs approval)."""
    return f"refunded {amount_usd:.2f} USD for {order_id}"


@support.tool
def whoami(ctx: RunContext[Customer]) -> dict[str, Any]:
    """The signed-in customer and their order ids."""
    return {"customer": ctx.deps.name, "orders": [*sorted(ORDERS), "ord-9"]}


@support.tool_plain
def order_status(order_id: str) -> dict[str, Any]:
    """Status and total (USD) of one order."""
    if order_id not in ORDERS:
        raise ModelRetry(f"no order {order_id}: check the id")
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
        try:
            print(refund(order_id=order_id, amount_usd=order["total_usd"]),
                  f"({order['total_usd'] * eur:.2f} EUR)")
        except PermissionError as error:
            print(f"not refunded: {error}")
"""


def scripted(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """The offline model: one execute_code call, then the code's output as the answer."""
    returns = [part for message in messages for part in message.parts if isinstance(part, ToolReturnPart)]
    if not returns:
        return ModelResponse(parts=[ToolCallPart("execute_code", {"code": CODE}, tool_call_id="refunds")])
    return ModelResponse(parts=[TextPart(returns[-1].model_response_str())])


async def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--offline", action="store_true", help="use a scripted model (no network)")
    parser.add_argument("--yes", action="store_true", help="approve every call automatically")
    parser.add_argument("--model", default=os.environ.get("PYDANTIC_AI_MODEL", "openai:gpt-4.1"))
    args = parser.parse_args()
    offline = args.offline or not os.environ.get("OPENAI_API_KEY")
    model: Any = FunctionModel(scripted) if offline else args.model
    auto = args.yes or not sys.stdin.isatty()

    # --8<-- [start:agent]
    deps = Customer("carol")
    async with code_action:  # starts the kernel; closes it at the end
        result = await support.run(TASK, deps=deps, model=model)
        while isinstance(result.output, DeferredToolRequests):  # the kernel waits meanwhile
            answers: dict[str, bool | ToolDenied] = {}
            for approval in pending_approvals(result.output):  # agent tools: server "agent_tools"
                approved = await ask_approval(approval, auto=auto)  # "approve agent_tools.refund(...)?"
                answers[approval.tool_call_id] = True if approved else ToolDenied("the user said no")
            result = await support.run(
                message_history=result.all_messages(),
                deferred_tool_results=result.output.build_results(approvals=answers),
                deps=deps,
                model=model,
            )
    # --8<-- [end:agent]
    print(result.output)
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
