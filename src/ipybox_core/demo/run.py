"""``ipybox demo``: what an agent's code action looks like, with you as the approver."""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path

from ipybox_core.approval import ApprovalRequest
from ipybox_core.executor import CodeExecutor, DisplayOutput, ExecutionResult, OutputChunk
from ipybox_core.terminal import ask_approval, registered_call, terminal_safe

NO_ANSWER = "no answer (end of input): the call was rejected; the demo ends here"
UNREGISTERED = "the call names no tool the demo registered: it is rejected"

DEMO_CELLS = [
    # 1: read-only calls, data processed in the kernel instead of in a model's context
    """\
from mcptools.shop import exchange_rate, list_products, place_order

books = list_products(category="books").products
eur = exchange_rate(currency="EUR")
for book in books:
    print(f"{book.name[:45]:45} {book.price_usd * eur:7.2f} EUR  (stock {book.stock})")
cheapest = min(books, key=lambda b: b.price_usd)
""",
    # 2: state persists between executions; a destructive call the user may reject
    """\
try:
    order = place_order(product_id=cheapest.id, quantity=1)
    print(f"ordered {cheapest.name!r}: {order.order_id}, {order.total_usd * eur:.2f} EUR")
except PermissionError as rejected:
    print(f"the order was not approved: {rejected}")
""",
]


async def run_demo(*, auto_approve: bool = False, workspace: Path | None = None) -> int:
    """Run the demo; returns a process exit code."""
    if not auto_approve and not sys.stdin.isatty():
        print("(stdin is not a terminal: approving tool calls automatically)")
        auto_approve = True
    with tempfile.TemporaryDirectory(prefix="ipybox-demo-") as tmp:
        ws = workspace or Path(tmp)
        print(f"starting a kernel (workspace {ws}) ...", flush=True)
        async with CodeExecutor(workspace=ws) as executor:
            print("connecting to the demo MCP server and generating its Python API ...", flush=True)
            server = {"command": sys.executable, "args": ["-m", "ipybox_core.demo.server"]}
            await executor.register_mcp_server("shop", server)
            print("\nThe agent's prompt would contain:\n")
            print(_indent(executor.api_reference()))
            for number, code in enumerate(DEMO_CELLS, 1):
                print(f"\n--- code action {number} ---\n{_indent(code)}")
                partial = ""
                no_answer = False
                async for event in executor.stream(code):
                    if isinstance(event, ApprovalRequest):
                        call = registered_call(event, executor.servers)  # named from the host's data
                        if call is None:
                            print(UNREGISTERED, flush=True)
                            await event.reject(UNREGISTERED)
                            continue
                        answer = await ask_approval(call, auto=auto_approve)
                        if answer:
                            await event.accept()
                        else:
                            no_answer = answer is None
                            await event.reject("no answer" if no_answer else "the user said no")
                    elif isinstance(event, OutputChunk):
                        partial += event.text  # print whole lines only: chunks may split one
                        lines, _, partial = partial.rpartition("\n")
                        if lines:
                            print(_indent(lines), end="")
                    elif isinstance(event, DisplayOutput):
                        print(_indent(event.text))
                    elif isinstance(event, ExecutionResult):
                        if partial:
                            print(_indent(partial), end="")
                        if no_answer:
                            print(NO_ANSWER)
                            return 1
                        if event.error is not None and event.error.ename == "PermissionError":
                            stopped = terminal_safe(event.error.evalue, lines=False)
                            print(f"code action {number} stopped: {stopped}; the demo ends here")
                            return 0
                        if event.error is not None:
                            print(_indent(event.error.traceback))
                            return 1
    print("\ndone.")
    return 0


def _indent(text: str) -> str:
    """``text`` as indented ``  | `` lines, escaped: no code output line can look like a question."""
    shown = terminal_safe(text).rstrip("\n")
    return "".join(f"  | {line}\n" for line in shown.split("\n")) if shown else ""


if __name__ == "__main__":
    raise SystemExit(asyncio.run(run_demo(auto_approve="--yes" in sys.argv)))
