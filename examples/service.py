"""An approval that outlives the process that asked for it: ipybox as a service.

    python examples/service.py

Starts `ipybox serve` (with the demo shop server; see servers/ipybox_service.py) as its own
process, as you would run it under systemd or in a container. Worker A starts code in a
conversation's kernel; the code's MCP call waits for approval, and worker A goes away without
answering. Worker B, a different client (in a real deployment another process or machine), finds
the waiting call by the conversation and call id, approves it, and the code continues in the same
kernel, with its variables.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import tempfile
from pathlib import Path

from servers.ipybox_service import ipybox_serve

from ipybox_core import ApprovalRequest
from ipybox_core.remote import RemoteSessions


async def main(url: str, token: str) -> None:
    # --8<-- [start:workers]
    code = (
        "from mcptools.shop import place_order\n"
        "budget = 50\n"
        "order = place_order(product_id='b-101', quantity=1)\n"
        "print(f'ordered for {order.total_usd} USD (budget {budget} USD): {order.order_id}')"
    )
    async with RemoteSessions(url, token=token, client_name="worker-a") as worker_a:
        session = await worker_a.session("conversation-42")  # e.g. a thread id
        execution = session.executor.stream(code, call_id="call-1")  # e.g. the model's tool call id
        request = await execution.next_stop()
        assert isinstance(request, ApprovalRequest)
        print(f"worker A: {request.name} waits for approval ({request.id[:8]}); worker A exits")

    async with RemoteSessions(url, token=token, client_name="worker-b") as worker_b:
        session = await worker_b.session("conversation-42")
        waiting = await session.executor.reattach("call-1")  # None if nothing waits under that id
        assert waiting is not None
        request = await waiting.next_stop()
        assert isinstance(request, ApprovalRequest)
        print(f"worker B: found {request.name} ({request.id[:8]}), approving")
        await request.accept()
        result = await waiting.wait()
        print("worker B:", result.to_text())
    # --8<-- [end:workers]


if __name__ == "__main__":
    token = secrets.token_urlsafe(32)
    with tempfile.TemporaryDirectory(prefix="ipybox-service-") as tmp:
        audit = Path(tmp) / "audit.jsonl"
        with ipybox_serve(Path(tmp), token, "--audit-log", str(audit)) as url:
            asyncio.run(main(url, token))
        decided = [json.loads(line) for line in audit.open()]
        print("audit log:", [(entry["tool"], entry["approved"], entry["decided_by"]) for entry in decided])
