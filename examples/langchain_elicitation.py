"""LangChain: an MCP server's question during a call of the agent's code is an interrupt too.

    python examples/langchain_elicitation.py

Needs ``pip install -e '.[langchain]'`` (in the ipybox checkout). A scripted model (no network, no
key) runs the user's message as code. The ``checkout`` server (examples/servers/checkout.py) asks
the user to confirm an order during its call; with ``CodeActionMiddleware(executor,
elicitation=True)`` that question pauses the graph as ``{"elicitation": {...}}`` and the resume
value answers it. A first answer the form refuses (a quantity above 5) is asked again with the
reason.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path
from typing import Any

from langchain.agents import create_agent
from langchain_sessions import RunsTheMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from ipybox_core import CodeExecutor
from ipybox_integrations.langchain import CodeActionMiddleware

CHECKOUT = {"command": sys.executable, "args": [str(Path(__file__).parent / "servers" / "checkout.py")]}
CODE = "from mcptools.checkout import checkout\nprint(checkout(product_id='b-101'))"


async def main(workspace: str) -> None:
    async with CodeExecutor(workspace=workspace, approval="never") as executor:
        await executor.register_mcp_server("checkout", CHECKOUT)
        # --8<-- [start:questions]
        agent = create_agent(
            RunsTheMessage(),  # any chat model
            middleware=[CodeActionMiddleware(executor, elicitation=True)],
            checkpointer=InMemorySaver(),
        )
        config: Any = {"configurable": {"thread_id": "t1"}}
        payload: Any = {"messages": [{"role": "user", "content": CODE}]}
        quantities = iter([9, 2])  # the user's answers: 9 is more than the form allows
        while True:
            out = await agent.ainvoke(payload, config, version="v2")
            if not out.interrupts:
                break
            pause = out.interrupts[0]
            if "elicitation" not in pause.value:  # an approval: a HITLRequest
                payload = Command(resume={"decisions": [{"type": "approve"}]})
                continue
            question = pause.value["elicitation"]  # server, tool, message, schema (or url), error
            if "error" in question:
                print("refused:", question["error"])
            print(f"{question['server']}.{question['tool']} asks: {question['message']}")
            answer = {"quantity": next(quantities), "shipping": "express"}
            payload = Command(resume={"action": "accept", "content": answer})  # or decline / cancel
        print("result:", out.value["messages"][-1].text)
        # --8<-- [end:questions]


if __name__ == "__main__":
    with tempfile.TemporaryDirectory(prefix="ipybox-lc-elicit-") as tmp:
        asyncio.run(main(tmp))
