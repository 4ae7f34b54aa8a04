"""One LangChain agent, many conversations: each LangGraph thread gets its own kernel.

    python examples/langchain_sessions.py

Needs ``pip install -e '.[langchain]'`` (in the ipybox checkout). A scripted model (no network, no
key) runs each user message as code and reports the result. Two threads set different budgets side
by side and query the demo shop with them; then one thread's kernel is closed (as the idle timeout
would close it) and its next result starts with the restart notice.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from langchain.agents import create_agent
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langgraph.checkpoint.memory import InMemorySaver

from ipybox_core import Sessions
from ipybox_integrations.langchain import CodeActionMiddleware

SHOP = {"command": sys.executable, "args": ["-m", "ipybox_core.demo.server"]}
BOOKS = (
    "from mcptools.shop import list_products\n"
    "books = list_products(category='books').products\n"
    "print([b.name for b in books if b.price_usd <= budget])"
)


class RunsTheMessage(BaseChatModel):
    """Stands in for a chat model: the user's message is the code; the tool result is the answer."""

    @property
    def _llm_type(self) -> str:
        return "runs-the-message"

    def bind_tools(self, tools: Any, **kwargs: Any) -> RunsTheMessage:
        return self

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        last = messages[-1]
        if last.type == "tool":
            reply = AIMessage(content=last.text)
        else:
            call = {"name": "execute_code", "args": {"code": last.text}, "id": f"call_{len(messages)}"}
            reply = AIMessage(content="", tool_calls=[call])
        return ChatResult(generations=[ChatGeneration(message=reply)])


async def main() -> None:
    # --8<-- [start:sessions]
    async with Sessions(
        mcp_servers={"shop": SHOP},
        approval=lambda request: True if request.annotations.read_only_hint else None,  # others: asked
        idle_timeout=900,  # seconds without use before a thread's kernel is closed
    ) as sessions:
        agent = create_agent(
            RunsTheMessage(),  # any chat model
            middleware=[CodeActionMiddleware(sessions)],  # one kernel per thread_id
            checkpointer=InMemorySaver(),
        )

        async def turn(thread_id: str, text: str) -> str:
            config: Any = {"configurable": {"thread_id": thread_id}}
            out = await agent.ainvoke({"messages": [{"role": "user", "content": text}]}, config, version="v2")
            return str(out.value["messages"][-1].text)

        await asyncio.gather(turn("alice", "budget = 50"), turn("bob", "budget = 20"))
        print("alice:", await turn("alice", BOOKS))
        print("bob:", await turn("bob", BOOKS))
        # --8<-- [end:sessions]

        # --8<-- [start:notice]
        await sessions.close_session("bob")  # what the idle timeout does after 900 s
        print("bob:", await turn("bob", "print('budget' in globals())"))
        # --8<-- [end:notice]


if __name__ == "__main__":
    asyncio.run(main())
