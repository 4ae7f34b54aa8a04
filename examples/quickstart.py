"""Quickstart: run code that calls an MCP server, and approve each call it makes.

    python examples/quickstart.py          # asks y/N for each MCP call
    python examples/quickstart.py --yes    # approves every call (so does a stdin that is not a terminal)

No API key needed: the code below is what an agent would write, and the MCP server is the small
demo shop bundled with ipybox. In an agent, the framework adapters (PydanticAI, LangChain, OpenAI
Agents) do this loop for you and ask through the framework's own human-in-the-loop mechanism.
"""

from __future__ import annotations

# --8<-- [start:quickstart]
import asyncio
import sys
import tempfile

from ipybox_core import ApprovalRequest, CodeExecutor, ExecutionResult, OutputChunk, ask_approval

SHOP = {"command": sys.executable, "args": ["-m", "ipybox_core.demo.server"]}  # an MCP server (stdio)

CODE = """
from mcptools.shop import list_products, place_order

books = list_products(category="books", in_stock_only=True).products
cheapest = min(books, key=lambda book: book.price_usd)
order = place_order(product_id=cheapest.id, quantity=1)
print(f"ordered {cheapest.name!r} for {order.total_usd} USD: {order.order_id}")
"""


async def main(auto_approve: bool) -> None:
    with tempfile.TemporaryDirectory() as workspace:  # the kernel's working directory
        async with CodeExecutor(workspace=workspace) as executor:
            await executor.register_mcp_server("shop", SHOP)  # generates `mcptools.shop`
            print(executor.api_reference())  # the Python API, as an agent's prompt gets it

            async for event in executor.stream(CODE):
                if isinstance(event, ApprovalRequest):  # the code waits at this MCP call
                    if await ask_approval(event, auto=auto_approve):  # "approve shop.place_order(...)? [y/N]"
                        await event.accept()
                    else:
                        await event.reject("the user said no")  # PermissionError in the code
                elif isinstance(event, OutputChunk):
                    print(event.text, end="")
                elif isinstance(event, ExecutionResult) and event.error is not None:
                    print(event.error.traceback)
    # --8<-- [end:quickstart]


if __name__ == "__main__":
    auto = "--yes" in sys.argv[1:] or not sys.stdin.isatty()
    if auto:
        print("(approving every MCP call automatically)")
    asyncio.run(main(auto))
