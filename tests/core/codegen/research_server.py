"""A real MCP server (``MCPServer``, in-process) for end-to-end calls of generated code.

Nested models, an enum, keyword-named parameters (``from``, ``class``), a wrapped primitive result,
a dict result, a text-only result, an image result and a failing tool.
"""

# no ``from __future__ import annotations``: MCPServer evaluates the annotations of the tools

import functools
from collections.abc import Callable
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Image, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel, Field

TINY_PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360f8cfc0f01f0005000201e221bc330000000049454e44ae426082"
)


class Address(BaseModel):
    street: str
    city: str
    zip: str | None = None


class Customer(BaseModel):
    name: str
    email: str | None = None
    address: Address


class LineItem(BaseModel):
    sku: str
    qty: int = Field(ge=1, default=1)
    unit_price: float = 0.0


class OrderSummary(BaseModel):
    order_id: str
    city: str
    item_count: int
    total: float
    priority: Literal["low", "normal", "high"]
    tags: list[str]


def _aliased(**python_to_wire: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """MCPServer calls tools with the alias as keyword; map it back to the Python parameter."""
    wire_to_python = {wire: python for python, wire in python_to_wire.items()}

    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def wrapper(**kwargs: Any) -> Any:
            return fn(**{wire_to_python.get(k, k): v for k, v in kwargs.items()})

        return wrapper

    return decorate


def research_server() -> MCPServer:
    mcp = MCPServer("research")

    @mcp.tool()
    def create_order(
        customer: Customer,
        items: list[LineItem],
        priority: Literal["low", "normal", "high"] = "normal",
        tags: list[str] | None = None,
    ) -> OrderSummary:
        """Create an order from a customer and line items."""
        return OrderSummary(
            order_id=f"ord-{customer.name.lower()}",
            city=customer.address.city,
            item_count=sum(i.qty for i in items),
            total=round(sum(i.qty * i.unit_price for i in items), 2),
            priority=priority,
            tags=tags or [],
        )

    @mcp.tool(name="text.to-upper")
    def to_upper(text: str, repeat: int = 1) -> str:
        """Upper-case text (a primitive result: MCP wraps it as {"result": ...})."""
        return text.upper() * repeat

    @mcp.tool(name="date_range")
    @_aliased(from_="from", class_="class")
    def date_range(
        from_: Annotated[str, Field(alias="from", description="start date")],
        to: str,
        class_: Annotated[Literal["day", "week"], Field(alias="class")] = "day",
    ) -> dict[str, str]:
        """Parameters named like Python keywords."""
        return {"from": from_, "to": to, "class": class_}

    @mcp.tool(structured_output=False)
    def echo(message: Annotated[str, Field(description="what to echo")]) -> str:
        """Echo a message (text result, no output schema)."""
        return message

    @mcp.tool(structured_output=False)
    def picture(caption: str) -> list[Any]:
        """A caption and an image."""
        return [caption, Image(data=TINY_PNG, format="png")]

    @mcp.tool()
    def fail(message: str) -> str:
        """Always fails with ``message``."""
        raise ToolError(message)

    return mcp
