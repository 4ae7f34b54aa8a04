"""A second small offline MCP server for the examples: the demo shop's sales ledger.

``sales`` returns many records (a few thousand for a month), ``file_report`` stores a short report.
Together with the bundled shop server (``python -m ipybox_core.demo.server``) it shows two MCP
servers composed in one code action. Run it over stdio with ``python examples/servers/ledger.py``.

If ``LEDGER_TOKEN`` is set in the server's environment, reports are signed with it: the token is a
stand-in for a credential that the MCP server needs and the agent's code must never see.
"""

from __future__ import annotations

import hashlib
import itertools
import os
import random

from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import BaseModel, Field

PRODUCT_IDS = ("b-101", "b-102", "g-201", "g-202", "t-301", "t-302")
"""The product ids of the demo shop's catalogue."""
SALES_PER_DAY = 80


class Sale(BaseModel):
    day: int
    product_id: str
    quantity: int
    channel: str


class SalesList(BaseModel):
    sales: list[Sale]


class ReportLine(BaseModel):
    label: str
    value: float


class Receipt(BaseModel):
    report_id: str
    lines: int
    signed: bool


_report_numbers = itertools.count(1)

mcp = MCPServer("ledger", instructions="The demo shop's sales ledger: sale records and filed reports.")


def _sales_of_day(day: int) -> list[Sale]:
    rng = random.Random(day)  # deterministic: the same day always has the same sales
    return [
        Sale(
            day=day,
            product_id=rng.choice(PRODUCT_IDS),
            quantity=rng.choice((1, 1, 1, 2, 3)),
            channel=rng.choice(("web", "web", "store")),
        )
        for _ in range(SALES_PER_DAY)
    ]


@mcp.tool(annotations=ToolAnnotations(read_only_hint=True))
def sales(
    first_day: int = Field(default=1, ge=1, le=366, description="first day of the year, 1-based"),
    last_day: int = Field(default=30, ge=1, le=366, description="last day of the year, inclusive"),
) -> SalesList:
    """Every sale of the shop between two days of the year (about 80 records a day)."""
    if last_day < first_day:
        raise ToolError(f"last_day ({last_day}) is before first_day ({first_day})")
    return SalesList(sales=[sale for day in range(first_day, last_day + 1) for sale in _sales_of_day(day)])


@mcp.tool(annotations=ToolAnnotations(destructive_hint=False, idempotent_hint=False))
def file_report(title: str, lines: list[ReportLine]) -> Receipt:
    """File a short report (a title and labelled numbers) in the ledger."""
    if not lines:
        raise ToolError("a report needs at least one line")
    token = os.environ.get("LEDGER_TOKEN", "")
    signature = hashlib.sha256((token + title).encode()).hexdigest()[:8] if token else ""
    number = next(_report_numbers)
    report_id = f"rep-{number:04d}-{signature}" if signature else f"rep-{number:04d}"
    return Receipt(report_id=report_id, lines=len(lines), signed=bool(token))


if __name__ == "__main__":
    mcp.run()
