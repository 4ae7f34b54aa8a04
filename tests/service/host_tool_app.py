"""An application process whose code calls its own host tool ``slow`` on an ipybox service.

``take URL LOG``: register ``slow`` (timeout 2 s), start the code under call id ``held`` in the
test's conversation, and when ``slow`` runs (it appends ``slow <pid>`` to LOG and prints
``RUNNING``) wait there: the test SIGKILLs this process while it holds the call.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1]))
sys.path.insert(0, str(Path(__file__).parent))

from service_kit import conversation_key

from ipybox_core.approval import ApprovalRequest
from ipybox_core.hosttools import HostCall, HostTool
from ipybox_core.remote import RemoteSessions

CODE = """
from agent_tools import slow
try:
    print("slow:", slow())
except Exception as error:
    print(type(error).__name__ + ":", error)
"""


async def main(url: str, log: Path) -> None:
    async def slow(call: HostCall) -> str:
        with log.open("a") as file:
            file.write(f"slow {os.getpid()}\n")
        print("RUNNING", flush=True)
        await asyncio.Event().wait()
        return "never"

    async with RemoteSessions(url, client_name="taker") as sessions:
        await sessions.register_host_tools([HostTool("slow", slow, "Takes its time.", timeout=2.0)])
        session = await sessions.session(conversation_key("host-tool-conversation"))
        async for event in session.executor.stream(CODE, call_id="held"):
            if isinstance(event, ApprovalRequest):
                await event.accept()


async def run(argv: list[str]) -> None:
    """The process's work for its command line ``argv`` (without the script)."""
    await main(argv[1], Path(argv[2]))


if __name__ == "__main__":
    asyncio.run(run(sys.argv[1:]))
