"""A LangChain application process whose agent's own tools the code calls, on an ipybox service.

``start URL DB LOG``: run the agent (``HumanInTheLoopMiddleware(interrupt_on={"refund": True})``)
until ipybox interrupts for the code's first ``refund``; print ``INTERRUPTED``. ``resume URL DB LOG``:
build the same agent on the same SQLite checkpoints and approve every interrupt until the run ends;
print ``OUTPUT`` with the tool message. Each tool appends ``<tool> <argument> <pid>`` to LOG.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parents[1] / "integrations" / "langchain"))
sys.path.insert(0, str(Path(__file__).parents[1]))

from langchain.agents import create_agent
from langchain.agents.middleware import HumanInTheLoopMiddleware
from langchain.tools import ToolRuntime
from langchain_core.tools import BaseTool, ToolException, tool
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.types import Command
from lc_kit import APPROVE, ScriptedChatModel, config, run_code_then_finish, text_of, tool_messages, user
from service_kit import conversation_key

from ipybox_core.remote import RemoteSessions
from ipybox_integrations.langchain import CodeActionMiddleware
from servers.agent_tools_cells import CALLS_CELL


def clerk_tools(log: Path) -> list[BaseTool]:
    def ran(what: str, argument: str) -> None:
        with log.open("a") as file:
            file.write(f"{what} {argument} {os.getpid()}\n")

    @tool
    def refund(order: str) -> str:
        """Refund an order."""
        ran("refund", order)
        return f"refunded {order}"

    @tool
    def whoami(runtime: ToolRuntime[dict[str, str], Any]) -> dict[str, Any]:
        """The signed-in user."""
        ran("whoami", runtime.context["user"])
        return {"user": runtime.context["user"]}

    @tool
    def lookup(order: str) -> dict[str, str]:
        """Look an order up."""
        ran("lookup", order)
        raise ToolException(f"no order {order}")

    return [refund, whoami, lookup]


async def main(role: str, url: str, db: Path, log: Path) -> None:
    thread = conversation_key("lc-tools-thread-1")
    async with (
        RemoteSessions(url, client_name=f"lc-tools-{role}") as sessions,
        AsyncSqliteSaver.from_conn_string(str(db)) as saver,
    ):
        hitl = HumanInTheLoopMiddleware(interrupt_on={"refund": True})
        tools = clerk_tools(log)  # given to the middleware too: a resuming worker needs them first
        middleware = CodeActionMiddleware(sessions, human_in_the_loop=hitl, agent_tools=tools)
        agent = create_agent(
            ScriptedChatModel(script=run_code_then_finish(CALLS_CELL)),
            tools=tools,
            middleware=[hitl, middleware],
            checkpointer=saver,
            context_schema=dict,
        )
        context = {"user": "carol" if role == "start" else "dave"}
        if role == "start":
            out = await agent.ainvoke(user(), config(thread), context=context, version="v2")
            assert out.interrupts, out
            print("INTERRUPTED", flush=True)
            return
        out = await agent.ainvoke(Command(resume=APPROVE), config(thread), context=context, version="v2")
        while out.interrupts:
            out = await agent.ainvoke(Command(resume=APPROVE), config(thread), context=context, version="v2")
        print("OUTPUT", json.dumps(text_of(tool_messages(out.value)[0])), flush=True)


async def run(argv: list[str]) -> None:
    """The process's work for its command line ``argv`` (without the script)."""
    await main(argv[0], argv[1], Path(argv[2]), Path(argv[3]))


if __name__ == "__main__":
    asyncio.run(run(sys.argv[1:]))
