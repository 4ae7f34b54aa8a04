"""An application process whose execution on an ipybox service gets an MCP server's question
(elicitation) and never answers it.

``hang URL FLIGHT MARKER``: start code that books ``FLIGHT`` with the ``elicit`` server's ``book``
under call id ``asked`` in the test's conversation (the code writes the tool's answer to ``MARKER``
and prints it); print ``ASKED <message>`` when the question arrives and wait: the test SIGKILLs this
process while it holds the question.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1]))
sys.path.insert(0, str(Path(__file__).parent))

from service_kit import conversation_key

from ipybox_core.mcp.elicitation import ElicitationRequest
from ipybox_core.remote import RemoteSessions

CODE = """
from pathlib import Path
from mcptools.elicit import book
line = book(flight={flight!r})
Path({marker!r}).write_text(line)
print(line)
"""


async def main(url: str, flight: str, marker: str) -> None:
    async with RemoteSessions(url, client_name="question-a") as sessions:
        session = await sessions.session(conversation_key("question-conversation"))
        execution = session.executor.stream(CODE.format(flight=flight, marker=marker), call_id="asked")
        async for event in execution:
            if isinstance(event, ElicitationRequest):
                print("ASKED", event.message, flush=True)
                await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[2], sys.argv[3], sys.argv[4]))
