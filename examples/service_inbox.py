"""The approvals inbox: what waits across an ipybox service's conversations, answered from anywhere.

    python examples/service_inbox.py

Starts `ipybox serve` (with the demo shop server; see servers/ipybox_service.py) as its own
process. Worker A starts code in two conversations; in each, an MCP call waits for approval. An
operator's process (a review dashboard, a cron job, or `ipybox approvals` in a shell) lists what
waits in the whole service, approves one call and rejects the other. The code goes on in the
service at once; worker A, when it picks its calls up again, gets what the answers did.
"""

from __future__ import annotations

import asyncio
import secrets
import tempfile
from pathlib import Path

from servers.ipybox_service import ipybox_serve

from ipybox_core import ApprovalRequest
from ipybox_core.approval import AuditLog
from ipybox_core.remote import RemoteSessions

ORDER = (
    "from mcptools.shop import place_order\n"
    "try:\n"
    "    order = place_order(product_id={product!r}, quantity=1)\n"
    "    print(f'ordered for {{order.total_usd}} USD: {{order.order_id}}')\n"
    "except PermissionError as error:\n"
    "    print('refused:', error)"
)


async def main(url: str, token: str) -> None:
    async with RemoteSessions(url, token=token, client_name="worker-a") as worker_a:
        waiting = {}
        for conversation, product in [("conversation-1", "b-101"), ("conversation-2", "t-302")]:
            executor = (await worker_a.session(conversation)).executor
            execution = executor.stream(ORDER.format(product=product), call_id=f"call-{conversation[-1]}")
            assert isinstance(await execution.next_stop(), ApprovalRequest)
            waiting[conversation] = executor
        print("worker A: two calls wait for approval")

        # --8<-- [start:inbox]
        async with RemoteSessions(url, token=token, client_name="operator") as operator:
            for approval in await operator.waiting_approvals():  # every conversation's, oldest first
                print(
                    f"inbox: {approval.conversation} {approval.call_id} {approval.name} "
                    f"{approval.arguments} asked by {approval.asked_by}"
                )
                if approval.arguments["product_id"] == "b-101":
                    await operator.answer_approval(approval.id, approve=True)
                else:
                    await operator.answer_approval(approval.id, approve=False, reason="over budget")
        # --8<-- [end:inbox]

        for conversation, executor in waiting.items():
            # --8<-- [start:resume]
            resumed = await executor.reattach(f"call-{conversation[-1]}")  # from any worker
            assert resumed is not None
            result = await resumed.wait()  # the outcome of the inbox's answer; the call ran once
            # --8<-- [end:resume]
            print(f"worker A: {conversation}: {result.text.strip()}")


if __name__ == "__main__":
    service_token = secrets.token_urlsafe(32)
    with tempfile.TemporaryDirectory(prefix="ipybox-inbox-") as tmp:
        audit = AuditLog(Path(tmp) / "audit.jsonl")  # the service writes it; this process reads it
        with ipybox_serve(Path(tmp), service_token, "--audit-log", str(audit.path)) as url:
            asyncio.run(main(url, service_token))
        print("audit log:", [(record.tool, record.approved, record.decided_by) for record in audit.read()])
