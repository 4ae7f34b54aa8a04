"""LangChain's ``execute_code`` tool outside a graph: an async callback approves each MCP call.

    python examples/langchain_callback.py

Needs ``pip install -e '.[langchain]'`` (in the ipybox checkout). No model and no key: the tool is
invoked directly with a tool call, as a hand-built graph or a test would. The callback gets the
same ``HITLRequest`` that a LangGraph interrupt would carry and returns a ``HITLResponse``.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile

from langchain.agents.middleware.human_in_the_loop import HITLRequest, HITLResponse

from ipybox_core import CodeExecutor
from ipybox_integrations.langchain import execute_code_tool

SHOP = {"command": sys.executable, "args": ["-m", "ipybox_core.demo.server"]}
CODE = """
from mcptools.shop import list_products, place_order
cheapest = min(list_products(category="tools").products, key=lambda p: p.price_usd)
try:
    place_order(product_id=cheapest.id, quantity=1)
except PermissionError as error:
    print("not ordered:", error)
"""


# --8<-- [start:callback]
async def approve(request: HITLRequest) -> HITLResponse:
    """Approve reads, reject everything else (a real application would ask a human)."""
    action = request["action_requests"][0]  # exactly one action: the MCP call
    print("approval needed:", action["name"], action["args"])
    if action["name"] in ("shop.list_products", "shop.exchange_rate"):
        return {"decisions": [{"type": "approve"}]}
    return {"decisions": [{"type": "reject", "message": "orders need a manager"}]}


async def main(workspace: str) -> None:
    async with CodeExecutor(workspace=workspace) as executor:
        await executor.register_mcp_server("shop", SHOP)
        tool = execute_code_tool(executor, approval_callback=approve)
        call = {"name": "execute_code", "args": {"code": CODE}, "id": "call-1", "type": "tool_call"}
        message = await tool.ainvoke(call)  # a ToolMessage with the code's output
        print(message.text)


# --8<-- [end:callback]


if __name__ == "__main__":
    with tempfile.TemporaryDirectory(prefix="ipybox-lc-callback-") as tmp:
        asyncio.run(main(tmp))
