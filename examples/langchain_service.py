"""A LangChain interrupt raised in one process and answered in another, with the agent on ``ipybox serve``.

    python examples/langchain_service.py

Needs ``pip install -e '.[langchain]' langgraph-checkpoint-sqlite`` (in the ipybox checkout).
Starts ``ipybox serve`` with the demo shop (see servers/ipybox_service.py), then runs this script
twice more, as two separate processes that share a SQLite checkpoint file. Process A runs the
agent until its code's MCP call interrupts, and exits. Process B builds the same agent, resumes the
thread with an approval, and the code goes on in the same kernel, with its variables. The stand-in
model of langchain_sessions.py (no network, no key) runs each user message as code.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from langchain.agents import create_agent
from langchain_sessions import RunsTheMessage
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.types import Command
from servers.demo import ORDER
from servers.ipybox_service import run_in_two_processes

from ipybox_core.remote import RemoteSessions
from ipybox_integrations.langchain import CodeActionMiddleware


# --8<-- [start:agent]
@asynccontextmanager
async def agent_on_service(url: str, checkpoints: Path) -> AsyncIterator[Any]:
    """The same agent in every process: kernels in the service, checkpoints in a SQLite file."""
    async with (
        RemoteSessions(url) as sessions,  # the token comes from $IPYBOX_MCP_TOKEN
        AsyncSqliteSaver.from_conn_string(str(checkpoints)) as saver,
    ):
        yield create_agent(
            RunsTheMessage(),  # any chat model
            middleware=[CodeActionMiddleware(sessions)],  # one kernel per thread_id, in the service
            checkpointer=saver,
        )


THREAD: Any = {"configurable": {"thread_id": "conversation-42"}}
# --8<-- [end:agent]


# --8<-- [start:processes]
async def process_a(url: str, checkpoints: Path) -> None:
    async with agent_on_service(url, checkpoints) as agent:
        await agent.ainvoke({"messages": [{"role": "user", "content": "budget = 50"}]}, THREAD)
        out = await agent.ainvoke({"messages": [{"role": "user", "content": ORDER}]}, THREAD, version="v2")
        request = out.interrupts[0].value["action_requests"][0]
        print(f"process A: {request['name']} waits for approval; exiting")


async def process_b(url: str, checkpoints: Path) -> None:
    async with agent_on_service(url, checkpoints) as agent:
        (interrupt,) = (await agent.aget_state(THREAD)).interrupts  # from the checkpoint
        print(f"process B: approving {interrupt.value['action_requests'][0]['name']}")
        out = await agent.ainvoke(Command(resume={"decisions": [{"type": "approve"}]}), THREAD, version="v2")
        print("process B:", out.value["messages"][-1].text)
        # --8<-- [end:processes]


if __name__ == "__main__":
    run_in_two_processes(__file__, process_a, process_b)
