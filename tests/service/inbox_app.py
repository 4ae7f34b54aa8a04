"""A worker process whose conversation asks for an approval, for the approvals inbox tests.

``inbox_app.py URL CONVERSATION CALL hold|leave|resume``:

- ``hold``: runs the test server's ``count()`` under call id ``CALL``, prints ``asked <approval id>``
  and stays attached; each stdin line is a command: ``reattach`` (pick the call up again and print
  where it stands) or ``accept`` (answer it itself);
- ``leave``: the same, but exits once asked (no worker is attached any more);
- ``resume``: a worker that did not ask: reattaches to ``CALL`` and prints where it stands.

Where a call stands: ``result <last line of its output>`` and ``decided <decided_by>``, or
``asked <approval id>``, or ``gone``.
"""

from __future__ import annotations

import asyncio
import sys

from ipybox_core.approval import ApprovalRequest
from ipybox_core.executor import Execution, ExecutionResult
from ipybox_core.remote import RemoteSessions

CODE = """\
from mcptools.test import count
try:
    print('count', count(tag={tag!r}))
except PermissionError as error:
    print('refused', error)
"""


def report(stop: ApprovalRequest | ExecutionResult, asked: ApprovalRequest | None) -> None:
    if isinstance(stop, ApprovalRequest):
        print("asked", stop.id, flush=True)
        return
    lines = stop.text.strip().splitlines()
    print("result", lines[-1] if lines else "", flush=True)
    if any(line.startswith("Note: this approval was already answered") for line in lines):
        print("note", lines[0], flush=True)
    if asked is not None and asked.decision is not None:
        print("decided", asked.decision.decided_by, flush=True)


async def main(url: str, conversation: str, call: str, mode: str) -> None:
    async with RemoteSessions(url, client_name=f"worker-{mode}") as sessions:
        executor = (await sessions.session(conversation)).executor
        if mode == "resume":
            found = await executor.reattach(call)
            if found is None:
                print("gone", flush=True)
                return
            report(await found.next_stop(), None)
            return
        execution: Execution = executor.stream(CODE.format(tag=conversation), call_id=call)
        asked = await execution.next_stop()
        assert isinstance(asked, ApprovalRequest), asked
        report(asked, None)
        if mode == "leave":
            return
        command = (await asyncio.to_thread(sys.stdin.readline)).strip()
        if command == "reattach":
            again = await executor.reattach(call)
            assert again is execution
            report(await again.next_stop(), asked)
        elif command == "accept":
            await asked.accept()
            report(await execution.next_stop(), asked)


async def run(argv: list[str]) -> None:
    """The process's work for its command line ``argv`` (without the script)."""
    await main(*argv[:4])


if __name__ == "__main__":
    asyncio.run(run(sys.argv[1:]))
