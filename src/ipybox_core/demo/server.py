"""A small offline MCP server bundled for the demo: a shop catalogue with exchange rates and orders.

Run it over stdio with ``python -m ipybox_core.demo.server``.
"""

from __future__ import annotations

import itertools
from typing import Literal

from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import BaseModel, Field

Category = Literal["books", "games", "tools"]


class Product(BaseModel):
    id: str
    name: str
    category: Category
    price_usd: float
    stock: int


class ProductList(BaseModel):
    products: list[Product]


class Order(BaseModel):
    order_id: str
    product_id: str
    quantity: int
    total_usd: float


_CATALOGUE = [
    Product(
        id="b-101",
        name="Structure and Interpretation of Computer Programs",
        category="books",
        price_usd=48.0,
        stock=3,
    ),
    Product(
        id="b-102", name="The Art of Computer Programming, Vol. 1", category="books", price_usd=79.5, stock=1
    ),
    Product(id="g-201", name="Go board (19x19)", category="games", price_usd=35.0, stock=12),
    Product(id="g-202", name="Chess set", category="games", price_usd=22.9, stock=0),
    Product(id="t-301", name="Soldering iron", category="tools", price_usd=41.25, stock=7),
    Product(id="t-302", name="Digital multimeter", category="tools", price_usd=18.75, stock=20),
]
_RATES = {"USD": 1.0, "EUR": 0.92, "GBP": 0.79, "JPY": 151.3, "CHF": 0.88}
_order_numbers = itertools.count(1001)

mcp = MCPServer("shop", instructions="A demo shop: products, exchange rates and orders.")


@mcp.tool(annotations=ToolAnnotations(read_only_hint=True))
def list_products(category: Category | None = None, in_stock_only: bool = False) -> ProductList:
    """List the products of the shop, optionally of one category or only those in stock."""
    found = [p for p in _CATALOGUE if (category is None or p.category == category)]
    if in_stock_only:
        found = [p for p in found if p.stock > 0]
    return ProductList(products=found)


@mcp.tool(annotations=ToolAnnotations(read_only_hint=True))
def exchange_rate(currency: str = Field(description="ISO code, e.g. EUR")) -> float:
    """How many units of ``currency`` one US dollar buys."""
    try:
        return _RATES[currency.upper()]
    except KeyError:
        raise ToolError(f"unknown currency {currency!r}; known: {', '.join(sorted(_RATES))}") from None


@mcp.tool(annotations=ToolAnnotations(destructive_hint=True))
def place_order(product_id: str, quantity: int = Field(default=1, ge=1)) -> Order:
    """Order ``quantity`` pieces of a product. Takes stock away: needs the user's approval."""
    product = next((p for p in _CATALOGUE if p.id == product_id), None)
    if product is None:
        raise ToolError(f"no product {product_id!r}")
    if product.stock < quantity:
        raise ToolError(f"only {product.stock} of {product.name!r} in stock")
    product.stock -= quantity
    return Order(
        order_id=f"ord-{next(_order_numbers)}",
        product_id=product_id,
        quantity=quantity,
        total_usd=round(product.price_usd * quantity, 2),
    )


if __name__ == "__main__":
    mcp.run()
