"""An application process whose execution checks each call (``Execution.before_call``) on an
ipybox service, and hangs in its check.

``hang URL TAG``: start code that calls ``count(tag=TAG)`` under call id ``checked`` in the test's
conversation, with a ``before_call`` that prints ``CHECKING <tool>`` and never answers: the test
SIGKILLs this process while the service waits for the check.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1]))
sys.path.insert(0, str(Path(__file__).parent))

from service_kit import conversation_key

from ipybox_core.approval import ApprovalRequest
from ipybox_core.remote import RemoteSessions

CODE = """
from mcptools.test import count
try:
    print("count:", count(tag={tag!r}))
except PermissionError as error:
    print("refused:", error)
"""


async def main(url: str, tag: str) -> None:
    async def before_call(request: ApprovalRequest) -> str | None:
        print("CHECKING", request.name, flush=True)
        await asyncio.Event().wait()
        return None

    async with RemoteSessions(url, client_name="checker-a") as sessions:
        session = await sessions.session(conversation_key("check-conversation"))
        execution = session.executor.stream(CODE.format(tag=tag), call_id="checked")
        execution.before_call = before_call
        async for _ in execution:
            pass


if __name__ == "__main__":
    asyncio.run(main(sys.argv[2], sys.argv[3]))
