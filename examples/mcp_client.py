"""ipybox as an MCP server: a client runs code through it and approves each MCP call by elicitation.

    python examples/mcp_client.py          # starts `ipybox mcp` over stdio, as Claude Code would
    python examples/mcp_client.py --http   # serves ipybox in this process over Streamable HTTP

The client registers the bundled demo shop server, runs code that lists the books and tries to
order the cheapest, accepts the read-only call and declines the destructive one.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

import uvicorn
from mcp import Client, StdioServerParameters
from mcp.types import ElicitResult

from ipybox_core.mcp_server import IpyboxService, McpServerSettings, build_server

IPYBOX = shutil.which("ipybox") or str(Path(sys.executable).with_name("ipybox"))
"""The `ipybox` command (installed next to this Python when it is not on PATH)."""

# --8<-- [start:client]
CODE = """
from mcptools.shop import list_products, place_order
books = list_products(category="books").products
cheapest = min(books, key=lambda book: book.price_usd)
print(f"cheapest: {cheapest.name} for {cheapest.price_usd} USD")
try:
    place_order(product_id=cheapest.id, quantity=1)
except PermissionError as error:
    print("not ordered:", error)
"""


async def approve(context: Any, params: Any) -> ElicitResult:
    """Called once per MCP call the code makes: show it, decide."""
    print(params.message.replace("\n", " "))
    destructive = "destructive" in params.message.splitlines()[0]
    return ElicitResult(action="decline" if destructive else "accept")


async def run_client(ipybox: StdioServerParameters | str) -> None:
    async with Client(ipybox, elicitation_callback=approve) as client:
        shop = {"command": sys.executable, "args": ["-m", "ipybox_core.demo.server"]}
        await client.call_tool("register_mcp_server", {"name": "shop", "config": shop})
        result = await client.call_tool("execute_code", {"code": CODE})
        print(result.content[0].text)  # type: ignore[union-attr]


async def over_stdio(workspace: str) -> None:
    await run_client(StdioServerParameters(command=IPYBOX, args=["mcp", "--workspace", workspace]))
    # --8<-- [end:client]


# --8<-- [start:http]
async def over_http(workspace: str) -> None:
    service = IpyboxService(McpServerSettings(workspace=Path(workspace), auto_approve=False))
    app = build_server(service).streamable_http_app()  # an ASGI app: mount it where you like
    http = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning"))
    async with service:  # with build_server, you start and close the service yourself
        serving = asyncio.create_task(http.serve())
        while not http.started:
            await asyncio.sleep(0.05)
        port = http.servers[0].sockets[0].getsockname()[1]
        try:
            await run_client(f"http://127.0.0.1:{port}/mcp")
        finally:
            http.should_exit = True
            await serving
    # --8<-- [end:http]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--http", action="store_true", help="serve ipybox in this process over HTTP")
    with tempfile.TemporaryDirectory(prefix="ipybox-mcp-client-") as tmp:
        asyncio.run((over_http if parser.parse_args().http else over_stdio)(tmp))
