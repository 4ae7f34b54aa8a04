"""An MCP server that asks during a call: a question for the user (elicitation) and a completion
from the application's LLM (sampling), answered by this application while kernel code runs.

    python examples/upstream_requests.py

The ``checkout`` server (examples/servers/checkout.py) asks to confirm an order with a form whose
fields have defaults; the application answers with a quantity and ipybox fills in the rest. Its
``describe`` tool asks for a completion, answered by a stand-in for the application's LLM. The
server's log and progress messages appear on the code's stderr.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from mcp.types import CreateMessageResult, TextContent

from ipybox_core.executor import CodeExecutor
from ipybox_core.mcp.elicitation import ElicitationAnswer, ElicitationRequest
from ipybox_core.mcp.sampling import SamplingRequest

SERVER = {"command": sys.executable, "args": [str(Path(__file__).parent / "servers" / "checkout.py")]}


# --8<-- [start:elicit]
async def elicit(request: ElicitationRequest) -> ElicitationAnswer:
    """A question from an MCP server for the user; here: always two, the rest as the defaults."""
    print(f"{request.server}.{request.tool} asks: {request.message} (defaults: {request.defaults})")
    return ElicitationAnswer.accept({"quantity": 2})  # or .decline(), .cancel()


# --8<-- [end:elicit]


# --8<-- [start:sample]
async def sample(request: SamplingRequest) -> CreateMessageResult:
    """A completion an MCP server asks for; a real application calls its LLM here."""
    prompt = request.params.messages[-1].content
    text = prompt.text if isinstance(prompt, TextContent) else ""
    blurb = TextContent(type="text", text=f"{text.removeprefix('A blurb for ')}: a fine choice.")
    return CreateMessageResult(role="assistant", content=blurb, model="stand-in-llm")


# --8<-- [end:sample]


async def main() -> None:
    # --8<-- [start:executor]
    async with CodeExecutor(
        approval="never", mcp_elicit=elicit, mcp_sample=sample, mcp_servers={"checkout": SERVER}
    ) as executor:
        result = await executor.execute(
            "from mcptools.checkout import checkout, describe\n"
            "print(checkout(product_id='b-101'))\n"
            "print(describe(product_id='b-101'))\n"
        )
        print(result.text)
    # --8<-- [end:executor]


if __name__ == "__main__":
    asyncio.run(main())
