"""Two MCP servers composed in one code action: data flows between them inside the kernel.

    python examples/multi_server.py          # asks y/N for the call that needs a decision
    python examples/multi_server.py --yes    # approves it automatically (so does a non-terminal stdin)

The code reads a month of sales from the ``ledger`` server (examples/servers/ledger.py), joins them
with the ``shop`` server's catalogue and exchange rate, and files a three-line report back to the
ledger. The thousands of records never pass through a language model: only what the code prints
does. Read-only tools are allowed by the executor's rules; ``ledger.file_report`` asks.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path

from ipybox_core import (
    ApprovalRequest,
    ApprovalRules,
    CodeExecutor,
    ExecutionResult,
    OutputChunk,
    ask_approval,
)

LEDGER_SCRIPT = Path(__file__).parent / "servers" / "ledger.py"

# --8<-- [start:servers]
SERVERS = {
    "shop": {"command": sys.executable, "args": ["-m", "ipybox_core.demo.server"]},
    "ledger": {"command": sys.executable, "args": [str(LEDGER_SCRIPT)]},
}
# --8<-- [end:servers]

# --8<-- [start:code]
CODE = """
import json
from mcptools.ledger import file_report, sales
from mcptools.shop import exchange_rate, list_products

records = sales(first_day=1, last_day=30).sales           # ledger: thousands of records
catalogue = {p.id: p for p in list_products().products}  # shop: the catalogue
eur = exchange_rate(currency="EUR")                      # shop: one number

revenue = {}
for sale in records:
    product = catalogue[sale.product_id]
    revenue[product.category] = revenue.get(product.category, 0) + sale.quantity * product.price_usd * eur

receipt = file_report(                                   # ledger: the result goes back
    title="Revenue by category, days 1-30, EUR",
    lines=[{"label": name, "value": round(value, 2)} for name, value in sorted(revenue.items())],
)
moved = len(json.dumps([s.model_dump() for s in records] + [p.model_dump() for p in catalogue.values()]))
print(f"{len(records)} sales and {len(catalogue)} products ({moved:,} bytes of JSON) stayed in the kernel")
print(f"filed {receipt.report_id}:", ", ".join(f"{k} {v:,.2f} EUR" for k, v in sorted(revenue.items())))
"""
# --8<-- [end:code]


async def main(workspace: str, auto_approve: bool) -> int:
    # --8<-- [start:run]
    rules = ApprovalRules(allow_read_only=True)  # reads run freely; file_report asks
    async with CodeExecutor(workspace=workspace, approval=rules, mcp_servers=SERVERS) as executor:
        result: ExecutionResult | None = None
        async for event in executor.stream(CODE):
            if isinstance(event, ApprovalRequest):
                if await ask_approval(event, auto=auto_approve):  # "approve ledger.file_report(...)? [y/N]"
                    await event.accept()
                else:
                    await event.reject("the user said no")
            elif isinstance(event, OutputChunk):
                print(event.text, end="")
            elif isinstance(event, ExecutionResult):
                result = event
        assert result is not None
        print(f"the model would see {len(result.to_text()):,} characters: the code's printed output")
    # --8<-- [end:run]
    if result.error is not None:
        print(result.error.traceback)
        return 1
    return 0


if __name__ == "__main__":
    auto = "--yes" in sys.argv[1:] or not sys.stdin.isatty()
    if auto:
        print("(approving MCP calls automatically)")
    with tempfile.TemporaryDirectory(prefix="ipybox-multi-") as tmp:
        sys.exit(asyncio.run(main(tmp, auto)))
