"""Approvals: rules, a policy function, edited arguments, shell commands, timeouts and the audit log.

    python examples/approvals.py

Runs against the bundled demo shop MCP server and decides every request in code (no questions), so
it runs unattended. The docs page "Approvals" shows its sections.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path

from ipybox_core import ApprovalRequest, ApprovalRules, AuditLog, CodeExecutor, ExecutionResult, OutputChunk

SHOP = {"command": sys.executable, "args": ["-m", "ipybox_core.demo.server"]}


async def run(executor: CodeExecutor, code: str, answer: str = "accept") -> None:
    """Run ``code``; answer each approval request with ``answer``; print the output."""
    async for event in executor.stream(code):
        if isinstance(event, ApprovalRequest):
            print(f"  request: {event.name} {event.args}")
            if answer == "accept":
                await event.accept()
            elif answer == "reject":
                await event.reject("not now")
            # "ignore": leave it pending until the approval timeout rejects it
        elif isinstance(event, OutputChunk):
            print("  " + event.text, end="")
        elif isinstance(event, ExecutionResult) and event.error is not None:
            print(event.error.traceback)


async def main(workspace: Path) -> None:
    audit = workspace / "audit.jsonl"

    # --8<-- [start:rules]
    rules = ApprovalRules(
        allow=["shop.list_*", "shop.exchange_rate"],  # run without asking
        deny=["shop.place_order"],  # refused without asking: PermissionError in the code
        default="ask",  # everything else: an ApprovalRequest event
    )
    async with CodeExecutor(workspace=workspace, approval=rules, audit_log=audit) as executor:
        await executor.register_mcp_server("shop", SHOP)
        await run(
            executor,
            "from mcptools.shop import list_products, place_order\n"
            "print(len(list_products().products), 'products')\n"
            "try:\n    place_order(product_id='t-302')\n"
            "except PermissionError as error:\n    print('refused:', error)\n",
        )
    # --8<-- [end:rules]

    # --8<-- [start:policy]
    def policy(request: ApprovalRequest) -> bool | None:
        """True: approve, False: reject, None: ask the application (may also be async)."""
        if request.kind == "mcp" and request.annotations.read_only_hint:
            return True  # the server says the tool only reads
        if request.kind == "shell" and request.args["command"].startswith("rm "):
            return False
        return None

    async with CodeExecutor(
        workspace=workspace,
        approval=policy,
        approve_shell=True,  # !cmd and %%bash become approval requests too
        approval_timeout=2,  # unanswered requests are rejected after 2 s
        audit_log=audit,
    ) as executor:
        await executor.register_mcp_server("shop", SHOP)
        # --8<-- [end:policy]

        # --8<-- [start:edit]
        async for event in executor.stream(
            "from mcptools.shop import place_order\n"
            "order = place_order(product_id='t-302', quantity=5)\n"
            "print('ordered', order.quantity)"
        ):
            if isinstance(event, ApprovalRequest):
                await event.accept(arguments={**event.args, "quantity": 1})  # approve a smaller order
            elif isinstance(event, OutputChunk):
                print("  " + event.text, end="")
        # --8<-- [end:edit]

        # --8<-- [start:shell]
        await run(executor, "!echo the shell ran", answer="accept")
        await run(executor, "try:\n    !rm -rf build\nexcept PermissionError as error:\n    print(error)")
        # --8<-- [end:shell]

        # --8<-- [start:timeout]
        await run(
            executor,
            "try:\n    place_order(product_id='t-301')\nexcept PermissionError as error:\n    print(error)",
            answer="ignore",
        )
        # --8<-- [end:timeout]

    # --8<-- [start:audit]
    for record in AuditLog(audit).read():
        call = f"{record.server}.{record.tool}" if record.kind == "mcp" else "shell"
        verdict = "approved" if record.approved else "rejected"
        edited = f" as {record.edited_args}" if record.edited_args is not None else ""
        print(f"{call} {record.args} {verdict}{edited} by {record.decided_by}")
    # --8<-- [end:audit]


if __name__ == "__main__":
    with tempfile.TemporaryDirectory(prefix="ipybox-approvals-") as tmp:
        asyncio.run(main(Path(tmp)))
