"""Notebook-style data analysis: several code actions build on each other's state and end in a plot.

    python examples/data_analysis.py                  # saves the plot to a temporary directory
    python examples/data_analysis.py --out plot.png   # or where you say

Each cell is what an agent would send in one ``execute_code`` call. The first fetches a quarter of
sales from the ledger MCP server (examples/servers/ledger.py; the executor's rules allow its
read-only tools and deny the others), the next ones analyse the data kept in the kernel, and the last one
draws a matplotlib figure, which comes back as a PNG image in the result.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from pathlib import Path

from ipybox_core import ApprovalRules, CodeExecutor

LEDGER = {"command": sys.executable, "args": [str(Path(__file__).parent / "servers" / "ledger.py")]}

# --8<-- [start:cells]
CELLS = [
    # 1: fetch the data once; it stays in the kernel
    """
from mcptools.ledger import sales
import numpy as np

records = sales(first_day=1, last_day=91).sales
days = np.array([r.day for r in records])
units = np.array([r.quantity for r in records])
web = np.array([r.channel == "web" for r in records])
print(f"{len(records)} sales records, {units.sum()} units")
""",
    # 2: analyse what the first cell left behind
    """
weeks = (days - 1) // 7
weekly_web = np.bincount(weeks[web], weights=units[web])
weekly_store = np.bincount(weeks[~web], weights=units[~web])
busiest = int((weekly_web + weekly_store).argmax())
print(f"{len(weekly_web)} weeks, web share {units[web].sum() / units.sum():.0%}, busiest: week {busiest + 1}")
""",
    # 3: a figure; displaying it returns a PNG image
    """
import matplotlib.pyplot as plt

fig, ax = plt.subplots(figsize=(7, 3.5))
ax.bar(np.arange(len(weekly_web)) + 1, weekly_web, label="web")
ax.bar(np.arange(len(weekly_store)) + 1, weekly_store, bottom=weekly_web, label="store")
ax.set(xlabel="week", ylabel="units sold", title="Units sold per week and channel")
ax.legend(loc="lower right")
plt.show()
""",
]
# --8<-- [end:cells]


async def main(out: Path) -> int:
    with tempfile.TemporaryDirectory(prefix="ipybox-analysis-") as workspace:
        # --8<-- [start:run]
        # execute() cannot ask anyone (it raises unless approve_all=True), so let the rules decide:
        # read-only tools (like `sales`) run, anything else is denied without asking.
        rules = ApprovalRules(allow_read_only=True, default="deny")
        async with CodeExecutor(workspace=workspace, approval=rules) as executor:
            await executor.register_mcp_server("ledger", LEDGER)
            for number, cell in enumerate(CELLS, 1):
                result = await executor.execute(cell)
                print(f"[{number}] {result.to_text()}")
                if result.error is not None:
                    return 1
            png = result.images[0]  # the figure of the last cell, as PNG bytes
            out.write_bytes(png)
            print(f"saved the plot ({len(png):,} bytes) to {out}")
        # --8<-- [end:run]
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / "ipybox-weekly-sales.png")
    sys.exit(asyncio.run(main(parser.parse_args().out)))
