"""LangChain: one interrupt per held MCP call in the ``per_call`` shape, and the code's output live.

    python examples/langchain_per_call.py

Needs ``pip install -e '.[langchain]'`` (in the ipybox checkout). A scripted model (no network, no
key) runs the user's message as code. The code prints while it works; ``stream_mode="custom"``
shows each line as it is printed. Its order waits for a decision, asked as
``HumanInTheLoopMiddleware(interrupt_mode="per_call")`` asks: a ``ToolApprovalRequest`` answered
with one decision keyed by the interrupt's id.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from typing import Any

from langchain.agents import create_agent
from langchain_sessions import RunsTheMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from ipybox_core import CodeExecutor
from ipybox_integrations.langchain import CodeActionMiddleware

SHOP = {"command": sys.executable, "args": ["-m", "ipybox_core.demo.server"]}
CODE = """
from mcptools.shop import list_products, place_order
print("looking for the cheapest tool...", flush=True)
cheapest = min(list_products(category="tools").products, key=lambda p: p.price_usd)
print("found", cheapest.name, flush=True)
print("ordered:", place_order(product_id=cheapest.id, quantity=1).order_id)
"""


async def main(workspace: str) -> None:
    read_only = lambda request: True if request.annotations.read_only_hint else None  # noqa: E731
    async with CodeExecutor(workspace=workspace, approval=read_only) as executor:
        await executor.register_mcp_server("shop", SHOP)
        # --8<-- [start:per_call]
        agent = create_agent(
            RunsTheMessage(),  # any chat model
            middleware=[CodeActionMiddleware(executor, interrupt_mode="per_call")],
            checkpointer=InMemorySaver(),
        )
        config: Any = {"configurable": {"thread_id": "t1"}}
        payload: Any = {"messages": [{"role": "user", "content": CODE}]}
        while payload is not None:
            pause = None
            events: Any = agent.astream(payload, config, stream_mode=["custom", "updates"])
            async for mode, chunk in events:
                if mode == "custom":  # the code's output, as it prints it
                    print("live:", chunk["text"], end="")
                elif "__interrupt__" in chunk:
                    pause = chunk["__interrupt__"][0]
            payload = None
            if pause is not None:  # a ToolApprovalRequest: type, tool_call_id, name, args, description
                print("approve?", pause.value["name"], pause.value["args"])
                payload = Command(resume={pause.id: {"type": "approve"}})
        final = await agent.aget_state(config)
        print("result:", final.values["messages"][-1].text)
        # --8<-- [end:per_call]


if __name__ == "__main__":
    with tempfile.TemporaryDirectory(prefix="ipybox-lc-per-call-") as tmp:
        asyncio.run(main(tmp))
