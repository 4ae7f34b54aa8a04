"""A LangChain application process on an ipybox service, its checkpoints in a SQLite file.

``start URL DB [hold|add|running]``: run the agent until ipybox interrupts for an MCP call, print
``INTERRUPTED`` with the action (with ``hold``, then wait to be killed; with ``add``, the second step
calls ``add`` before ``count``; with ``running``, the second step prints and then sleeps: print
``RUNNING`` when its output streams, then wait to be killed). ``resume URL DB approve|reject|none``: build
the same agent on the same file and resume the thread with that decision (``none``:
``ainvoke(None)``, no answer); print ``OUTPUT`` with the tool messages and the interrupts left.
``moveon URL DB``: new input on the thread, ignoring the interrupt; print ``OUTPUT`` likewise.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parents[1] / "integrations" / "langchain"))
sys.path.insert(0, str(Path(__file__).parents[1]))

from langchain_core.messages import AIMessage, BaseMessage
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.types import Command
from lc_kit import APPROVE, action, config, make_agent, reject, text_of, tool_call, tool_messages, user
from service_kit import conversation_key, counting_steps

from ipybox_core.remote import RemoteSessions
from ipybox_integrations.langchain import CodeActionMiddleware


def codes(thread: str, extra: str) -> list[str]:
    """The model's code: a variable, then ``count()`` of the thread (after ``add()`` with ``add``)."""
    count = f"count(tag={thread!r})"
    if extra == "running":
        return ["state = 'kept'", "print('running', flush=True)\nimport time\ntime.sleep(600)"]
    if extra == "add":
        return [
            "state = 'kept'",
            f"from mcptools.test import add, count\nadd(a=1, b=2)\nprint('count', {count}, state)",
        ]
    return counting_steps(thread)


def scripted(steps: list[str]) -> Callable[[list[BaseMessage]], AIMessage]:
    def script(messages: list[BaseMessage]) -> AIMessage:
        """One execute_code call per step, each after the previous one's result; then 'done'."""
        done = sum(1 for message in messages if message.type == "tool")
        if done < len(steps):
            return AIMessage(content="", tool_calls=[tool_call(steps[done], f"call_{done}")])
        return AIMessage(content="done")

    return script


def moved_on(messages: list[BaseMessage]) -> AIMessage:
    """After the new input: one execute_code call that needs the kernel free; then 'done'."""
    if messages[-1].type == "human":
        return AIMessage(content="", tool_calls=[tool_call("print('free', state)", "call_9")])
    return AIMessage(content="done")


async def main(role: str, url: str, db: Path, extra: str) -> None:
    thread = conversation_key("lc-thread-1")
    async with (
        RemoteSessions(url, client_name=f"lc-{role}") as sessions,
        AsyncSqliteSaver.from_conn_string(str(db)) as saver,
    ):
        middleware = CodeActionMiddleware(sessions)
        script = moved_on if role == "moveon" else scripted(codes(thread, extra))
        _, agent = make_agent([middleware], script, checkpointer=saver)
        if role == "start" and extra == "running":
            async for _ in agent.astream(user(), config(thread), stream_mode="custom"):
                print("RUNNING", flush=True)  # the code's output streams: it runs now
                await asyncio.Event().wait()
        if role == "start":
            out = await agent.ainvoke(user(), config(thread), version="v2")
            (interrupt,) = out.interrupts
            print("INTERRUPTED", json.dumps(action(interrupt)["name"]), flush=True)
            if extra == "hold":
                await asyncio.Event().wait()
            return
        answer: Any = {"approve": APPROVE, "reject": reject("not now")}.get(extra)
        if role == "moveon":
            out = await agent.ainvoke(user("never mind that"), config(thread), version="v2")
        else:
            out = await agent.ainvoke(
                Command(resume=answer) if answer is not None else None, config(thread), version="v2"
            )
        report = {
            "tools": [text_of(message) for message in tool_messages(out.value)],
            "interrupts": [action(interrupt)["name"] for interrupt in out.interrupts],
        }
        print("OUTPUT", json.dumps(report), flush=True)


async def run(argv: list[str]) -> None:
    """The process's work for its command line ``argv`` (without the script)."""
    await main(argv[0], argv[1], Path(argv[2]), argv[3] if len(argv) > 3 else "")


if __name__ == "__main__":
    asyncio.run(run(sys.argv[1:]))
