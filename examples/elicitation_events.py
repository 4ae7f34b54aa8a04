"""An MCP server's question during a call, answered from the execution's events (no ``mcp_elicit``).

    python examples/elicitation_events.py

The ``checkout`` server (examples/servers/checkout.py) asks to confirm an order while kernel code
calls it. Without an ``mcp_elicit`` callback, the question is an ``ElicitationRequest`` event of the
execution that made the call, after the output printed before it; the application answers it there
(the call waits, its timeouts paused) and the tool's result reflects the answer.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from ipybox_core.executor import CodeExecutor, ElicitationRequest, ExecutionResult, OutputChunk

SERVER = {"command": sys.executable, "args": [str(Path(__file__).parent / "servers" / "checkout.py")]}


async def main() -> None:
    # --8<-- [start:stream]
    async with CodeExecutor(approval="never", mcp_servers={"checkout": SERVER}) as executor:
        code = (
            "print('placing the order')\n"
            "from mcptools.checkout import checkout\n"
            "print(checkout(product_id='b-101'))\n"
        )
        async for event in executor.stream(code):
            if isinstance(event, OutputChunk) and event.stream == "stdout":
                print(event.text, end="")
            elif isinstance(event, ElicitationRequest):
                print(f"{event.server}.{event.tool} asks: {event.message} (defaults: {event.defaults})")
                await event.accept({"quantity": 3})  # or event.decline(), event.cancel()
            elif isinstance(event, ExecutionResult):
                print("ok" if event.ok else event.to_text())
    # --8<-- [end:stream]


if __name__ == "__main__":
    asyncio.run(main())
