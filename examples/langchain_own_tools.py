"""An existing LangChain agent made code-acting: its own tools become Python functions for its code.

    python examples/langchain_own_tools.py            # OpenAI model if OPENAI_API_KEY is set
    python examples/langchain_own_tools.py --offline  # a scripted model, no network
    python examples/langchain_own_tools.py --yes      # approve every call automatically

The agent already has three tools: ``refund`` (gated by its ``HumanInTheLoopMiddleware``),
``whoami`` (reads the run's context and state through ``ToolRuntime``) and ``order_status``
(raises ``ToolException`` for an unknown order). Adding ``CodeActionMiddleware`` gives the code
``from agent_tools import refund, whoami, order_status`` next to the demo shop's MCP tools; one
code block calls them all in a loop. Each ``refund`` call from the code stops the agent with a
LangGraph interrupt, as the agent's ``interrupt_on`` asks, and the answer resumes the code.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
from dataclasses import dataclass
from typing import Any

from langchain.agents import create_agent
from langchain.agents.middleware import HumanInTheLoopMiddleware
from langchain.tools import ToolRuntime, tool
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import ToolException
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from ipybox_core import ApprovalRules, CodeExecutor
from ipybox_integrations.langchain import CodeActionMiddleware

DEMO_SERVER = {"command": sys.executable, "args": ["-m", "ipybox_core.demo.server"]}
TASK = "Refund every delivered order of mine, in EUR terms."
ORDERS = {"ord-1": ("delivered", 30.0), "ord-2": ("shipped", 12.0), "ord-3": ("delivered", 8.5)}


# --8<-- [start:tools]
@dataclass
class Customer:
    name: str


@tool
def refund(order_id: str, amount_usd: float) -> str:
    """Refund an order (moves money: the agent's HumanInTheLoopMiddleware gates it)."""
    return f"refunded {amount_usd:.2f} USD for {order_id}"


@tool
def whoami(runtime: ToolRuntime[Customer]) -> dict[str, Any]:
    """The signed-in customer and their order ids."""
    return {"customer": runtime.context.name, "orders": [*sorted(ORDERS), "ord-9"]}


@tool
def order_status(order_id: str) -> dict[str, Any]:
    """Status and total (USD) of one order."""
    if order_id not in ORDERS:
        raise ToolException(f"no order {order_id}")
    status, total = ORDERS[order_id]
    return {"status": status, "total_usd": total}


order_status.handle_tool_error = lambda error: f"order_status failed: {error}"
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


class OfflineModel(BaseChatModel):
    """Writes CODE as one execute_code call, then reports its output: no network, no key."""

    @property
    def _llm_type(self) -> str:
        return "scripted-own-tools"

    def bind_tools(self, tools: Any, **kwargs: Any) -> OfflineModel:
        return self

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        if messages[-1].type == "tool":
            reply = AIMessage(content=f"Done.\n{messages[-1].text}")
        else:
            call = {"name": "execute_code", "args": {"code": CODE}, "id": "call_refunds"}
            reply = AIMessage(content="", tool_calls=[call])
        return ChatResult(generations=[ChatGeneration(message=reply)])


def chat_model(offline: bool) -> BaseChatModel:
    if not offline and os.environ.get("OPENAI_API_KEY"):
        from langchain_openai import ChatOpenAI

        return ChatOpenAI(model=os.environ.get("OPENAI_MODEL", "gpt-4.1-mini"), use_responses_api=True)
    return OfflineModel()


async def decide(action: dict[str, Any], auto: bool) -> dict[str, Any]:
    """Ask in the terminal; the answer is a HumanInTheLoopMiddleware decision."""
    print(f"approval needed: {action['name']} {action['args']}")
    if auto:
        return {"type": "approve"}
    answer = await asyncio.to_thread(input, "  approve? [y/N] ")
    if answer.strip().lower() in {"y", "yes"}:
        return {"type": "approve"}
    return {"type": "reject", "message": "the user said no"}


async def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--offline", action="store_true", help="use a scripted model (no network)")
    parser.add_argument("--yes", action="store_true", help="approve every call automatically")
    args = parser.parse_args()
    auto = args.yes or not sys.stdin.isatty()

    with tempfile.TemporaryDirectory(prefix="ipybox-lc-tools-") as workspace:
        # --8<-- [start:agent]
        rules = ApprovalRules(allow_read_only=True)  # read-only MCP tools run without asking
        async with CodeExecutor(workspace=workspace, approval=rules) as executor:
            await executor.register_mcp_server("shop", DEMO_SERVER)
            hitl = HumanInTheLoopMiddleware(
                interrupt_on={"refund": {"allowed_decisions": ["approve", "reject"]}}
            )
            agent = create_agent(
                chat_model(args.offline),
                tools=[refund, whoami, order_status],
                system_prompt="You are a customer support agent.",
                # the one addition: the agent's tools reach the code, gated by the agent's own HITL
                middleware=[hitl, CodeActionMiddleware(executor, human_in_the_loop=hitl)],
                checkpointer=InMemorySaver(),
                context_schema=Customer,
            )
            config: Any = {"configurable": {"thread_id": "carol"}}
            customer = Customer(name="carol")
            task: Any = {"messages": [{"role": "user", "content": TASK}]}
            out = await agent.ainvoke(task, config, context=customer, version="v2")
            while out.interrupts:  # one HITLRequest per gated call: refund from the code
                action = out.interrupts[0].value["action_requests"][0]  # name: agent_tools.refund
                resume: Command[Any] = Command(resume={"decisions": [await decide(action, auto)]})
                out = await agent.ainvoke(resume, config, context=customer, version="v2")
        # --8<-- [end:agent]
        print(out.value["messages"][-1].text)
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
