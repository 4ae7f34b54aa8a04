"""One kernel per conversation: a Sessions template, two conversations, a closed kernel's notice.

    python examples/sessions.py

Two conversations run code side by side, each in its own kernel and workspace, with one shared
connection to the demo shop server. Then one conversation's kernel is closed (as the idle timeout
would close it) and its next turn gets a new kernel and a sentence for the model saying so.
"""

from __future__ import annotations

import asyncio
import sys

from ipybox_core import Sessions

SHOP = {"command": sys.executable, "args": ["-m", "ipybox_core.demo.server"]}


async def main() -> None:
    # --8<-- [start:sessions]
    async with Sessions(
        mcp_servers={"shop": SHOP},  # the template: what every conversation's executor gets
        approval=lambda request: True if request.annotations.read_only_hint else None,  # others: asked
        warm=2,  # started kernels waiting for new conversations
        max_sessions=100,  # live kernels at most
        idle_timeout=900,  # seconds without use before a conversation's kernel is closed
    ) as sessions:
        alice = await sessions.session("conversation-alice")  # e.g. a thread id
        bob = await sessions.session("conversation-bob")
        await alice.executor.execute("budget = 50")
        await bob.executor.execute("budget = 20")
        code = (
            "from mcptools.shop import list_products\n"
            "books = list_products(category='books').products\n"
            "print([b.name for b in books if b.price_usd <= budget])"
        )
        print("alice:", (await alice.executor.execute(code)).text.strip())
        print("bob:", (await bob.executor.execute(code)).text.strip())
        # --8<-- [end:sessions]

        # --8<-- [start:notice]
        await sessions.close_session("conversation-bob")  # what the idle timeout does after 900 s
        bob = await sessions.session("conversation-bob")  # the next turn: a new kernel
        notice = bob.take_restart_notice()  # once; tell the model, e.g. in the tool result
        print("notice:", notice)
        print("bob:", (await bob.executor.execute("print('budget' in globals())")).text.strip())
        # --8<-- [end:notice]


if __name__ == "__main__":
    asyncio.run(main())
