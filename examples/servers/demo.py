"""The bundled demo shop MCP server as the examples configure it, and code they run against it."""

from __future__ import annotations

import sys

SHOP = {"command": sys.executable, "args": ["-m", "ipybox_core.demo.server"]}
"""The demo shop, a stdio MCP server (``mcptools.shop`` in the kernel)."""

BOOKS = (
    "from mcptools.shop import list_products\n"
    "books = list_products(category='books').products\n"
    "print([b.name for b in books if b.price_usd <= budget])"
)
"""Code listing the books within the kernel's ``budget`` (a read-only call)."""

ORDER = (
    "from mcptools.shop import place_order\n"
    "order = place_order(product_id='b-101', quantity=1)\n"
    "print(f'ordered for {order.total_usd} USD (budget {budget} USD): {order.order_id}')"
)
"""Code ordering a book (a call that waits for approval), printing the kernel's ``budget`` too."""
