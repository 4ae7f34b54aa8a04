"""A small offline MCP server for the examples that asks its client things during a call.

``checkout`` asks the user to confirm an order (an elicitation: a form whose fields have defaults),
``describe`` asks the client's LLM for a product blurb (sampling), and both send log and progress
notifications. Run it over stdio with ``python examples/servers/checkout.py``.
"""

from __future__ import annotations

from typing import Literal

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.types import SamplingMessage, TextContent
from pydantic import BaseModel, Field


class Confirmation(BaseModel):
    """The form ``checkout`` shows the user."""

    quantity: int = Field(default=1, ge=1, le=5, description="How many to order")
    shipping: Literal["standard", "express"] = "standard"


server = MCPServer("checkout", log_level="WARNING")


@server.tool()
async def checkout(product_id: str, ctx: Context) -> str:
    """Order a product after the user confirmed the quantity and shipping."""
    await ctx.info(f"checking stock of {product_id}")
    answer = await ctx.elicit(f"Order {product_id}?", Confirmation)
    if answer.action != "accept":
        return f"not ordered ({answer.action})"
    await ctx.report_progress(1, 1, "order placed")
    return f"ordered {answer.data.quantity} x {product_id}, {answer.data.shipping} shipping"


@server.tool()
async def describe(product_id: str, ctx: Context) -> str:
    """A one-line blurb for a product, written by the client's LLM."""
    prompt = SamplingMessage(role="user", content=TextContent(type="text", text=f"A blurb for {product_id}"))
    result = await ctx.session.create_message([prompt], max_tokens=40)
    return result.content.text if isinstance(result.content, TextContent) else "(no text)"


if __name__ == "__main__":
    server.run("stdio")
