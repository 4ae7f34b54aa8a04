"""ipybox as the client under test of the MCP conformance suite (``@modelcontextprotocol/conformance``).

The suite starts a test server for each scenario and runs ``python client.py <server url>`` with
the scenario's name in ``MCP_CONFORMANCE_SCENARIO``. The client uses ipybox's public API only
(``McpRegistry`` with the config a user would write) and does what an application would do:
register the server (connect, list its tools) and call a tool.
"""

from __future__ import annotations

import asyncio
import os
import sys

from ipybox_core.mcp import McpRegistry

CALLS = {"tools_call": ("add_numbers", {"a": 5, "b": 3})}
"""The tool call each scenario expects of its client (the others only connect and list tools)."""


async def main(url: str, scenario: str) -> None:
    async with McpRegistry(connect_timeout=20, call_timeout=20) as registry:
        tools = await registry.add("conformance", {"url": url})
        print(f"{scenario}: {len(tools)} tools: {', '.join(tool.name for tool in tools)}")
        call = CALLS.get(scenario)
        if call is None and tools and scenario not in ("initialize",):
            call = (tools[0].name, {})
        if call is not None:
            result = await registry.call("conformance", *call)
            print(f"{call[0]}: {result.text}")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[-1], os.environ.get("MCP_CONFORMANCE_SCENARIO", "")))
