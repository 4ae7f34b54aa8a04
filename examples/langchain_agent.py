"""A LangChain agent that acts by writing Python, with you approving its MCP calls in the terminal.

    python examples/langchain_agent.py             # OpenAI model if OPENAI_API_KEY is set
    python examples/langchain_agent.py --offline   # scripted model, no network, no key
    python examples/langchain_agent.py --yes       # approve every call automatically

Needs ``pip install -e '.[langchain]' langchain-openai`` (in the ipybox checkout). The agent's code
runs in an IPython kernel and calls the bundled demo shop MCP server through its generated Python
API. Read-only tools run freely; every other call (``shop.place_order``) stops the agent with a
LangGraph interrupt shaped like ``HumanInTheLoopMiddleware``'s, and the answer resumes the waiting
code.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
from collections.abc import Sequence
from typing import Any

from langchain.agents import create_agent
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from ipybox_core import ApprovalRules, CodeExecutor
from ipybox_integrations.langchain import CodeActionMiddleware

TASK = "Find the cheapest book in stock, tell me its price in EUR and order one copy."

OFFLINE_PLAN = [
    """\
from mcptools.shop import exchange_rate, list_products
books = list_products(category="books", in_stock_only=True).products
eur = exchange_rate(currency="EUR")
cheapest = min(books, key=lambda book: book.price_usd)
print(f"cheapest book: {cheapest.name} ({cheapest.price_usd * eur:.2f} EUR)")""",
    """\
from mcptools.shop import place_order
try:
    order = place_order(product_id=cheapest.id, quantity=1)
    print(f"ordered: {order.order_id}, {order.total_usd * eur:.2f} EUR")
except PermissionError as rejected:
    print(f"the order was not approved: {rejected}")""",
]


class ScriptedModel(BaseChatModel):
    """Plays OFFLINE_PLAN (one execute_code call per step), then reports: no network, no key."""

    @property
    def _llm_type(self) -> str:
        return "scripted-demo"

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedModel:
        return self

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        step = sum(1 for message in messages if message.type == "tool")
        if step < len(OFFLINE_PLAN):
            call = {"name": "execute_code", "args": {"code": OFFLINE_PLAN[step]}, "id": f"call_{step}"}
            reply = AIMessage(content="", tool_calls=[call])
        else:
            reply = AIMessage(content=f"Done. {messages[-1].text}")
        return ChatResult(generations=[ChatGeneration(message=reply)])


def chat_model(offline: bool) -> BaseChatModel:
    if not offline and os.environ.get("OPENAI_API_KEY"):
        from langchain_openai import ChatOpenAI

        # The Responses API accepts images in tool results (Chat Completions does not).
        return ChatOpenAI(model=os.environ.get("OPENAI_MODEL", "gpt-4.1-mini"), use_responses_api=True)
    if not offline:
        print("(OPENAI_API_KEY is not set: using the scripted offline model)")
    return ScriptedModel()


# --8<-- [start:decide]
async def decide(request: dict[str, Any], auto: bool) -> dict[str, Any]:
    """Ask in the terminal; the answer is a HumanInTheLoopMiddleware decision."""
    print(f"\n  approval needed: {request['description']}")
    if auto:
        print("  -> approved (auto)")
        return {"type": "approve"}
    answer = await asyncio.to_thread(input, "  approve? [y/N] ")
    if answer.strip().lower() in {"y", "yes"}:
        return {"type": "approve"}
    reason = await asyncio.to_thread(input, "  reason (optional): ")
    return {"type": "reject", "message": reason.strip() or "the user said no"}
    # --8<-- [end:decide]


def show(messages: Sequence[BaseMessage]) -> None:
    for message in messages:
        if isinstance(message, AIMessage):
            for call in message.tool_calls:
                print("\n--- agent's code ---\n" + call["args"].get("code", ""))
            if message.text:
                print(f"\n--- agent ---\n{message.text}")
        elif message.type == "tool":
            print(f"--- result ({getattr(message, 'status', 'success')}) ---\n{message.text}")


async def main(offline: bool, auto: bool) -> int:
    if not auto and not sys.stdin.isatty():
        print("(stdin is not a terminal: approving every call automatically)")
        auto = True
    elif auto:
        print("(--yes: approving every call automatically)")
    with tempfile.TemporaryDirectory(prefix="ipybox-langchain-") as workspace:
        # --8<-- [start:agent]
        async with CodeExecutor(
            workspace=workspace, approval=ApprovalRules(allow_read_only=True)
        ) as executor:
            shop = {"command": sys.executable, "args": ["-m", "ipybox_core.demo.server"]}
            await executor.register_mcp_server("shop", shop)
            agent = create_agent(
                chat_model(offline),
                system_prompt="You help customers of a small shop.",
                middleware=[CodeActionMiddleware(executor)],
                checkpointer=InMemorySaver(),
            )
            config: Any = {"configurable": {"thread_id": "terminal"}}
            print(f"user: {TASK}")
            out = await agent.ainvoke({"messages": [{"role": "user", "content": TASK}]}, config, version="v2")
            shown = 1
            while out.interrupts:  # one HITLRequest per MCP call that needs a decision
                messages = (await agent.aget_state(config)).values["messages"]
                show(messages[shown:])
                shown = len(messages)
                decision = await decide(out.interrupts[0].value["action_requests"][0], auto)
                out = await agent.ainvoke(Command(resume={"decisions": [decision]}), config, version="v2")
            show(out.value["messages"][shown:])
        # --8<-- [end:agent]
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--offline", action="store_true", help="use a scripted model (no API key, no network)"
    )
    parser.add_argument("--yes", action="store_true", help="approve every MCP call automatically")
    arguments = parser.parse_args()
    raise SystemExit(asyncio.run(main(arguments.offline, arguments.yes)))
