"""One OpenAI Agents SDK agent, many conversations: each conversation key gets its own kernel.

    python examples/openai_agents_sessions.py

Needs ``pip install -e '.[openai-agents]'`` (in the ipybox checkout). A stand-in model (no network,
no key) runs each user message as code and answers with the result. Two users set different
budgets side by side and query the demo shop with them; one user's MCP call waits for approval
while the other goes on; then one user's kernel is closed (as the idle timeout would close it) and
the next result starts with the restart notice.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from agents import Agent, ModelResponse, Runner, set_tracing_disabled
from agents.testing import ModelCall, ModelStep, ScriptedModel, assistant_message, function_call
from servers.demo import BOOKS, ORDER, SHOP

from ipybox_core import Sessions
from ipybox_integrations.openai_agents import CodeActionTool


class RunsTheMessage(ScriptedModel):
    """Stands in for an LLM: the user's message is the code; the tool's result is the answer."""

    async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
        self.enqueue(ModelStep.respond(self.reply))  # one step for every call
        return await super().get_response(*args, **kwargs)

    @staticmethod
    def reply(call: ModelCall) -> list[Any]:
        last = call.input[-1]
        if last.get("type") == "function_call_output":
            output = last["output"]
            text = output if isinstance(output, str) else "".join(part.get("text", "") for part in output)
            return [assistant_message(text.strip())]
        return [function_call("execute_code", {"code": last["content"]}, call_id=f"call_{uuid.uuid4().hex}")]


async def main() -> None:
    set_tracing_disabled(True)  # the SDK exports traces to OpenAI by default
    # --8<-- [start:sessions]
    async with Sessions(
        mcp_servers={"shop": SHOP},
        approval=lambda request: True if request.annotations.read_only_hint else None,  # others: asked
        idle_timeout=900,  # seconds without use before a conversation's kernel is closed
    ) as sessions:
        code = CodeActionTool(sessions, key=lambda ctx: ctx.context["user"])  # one kernel per user
        agent = Agent(
            name="shop_assistant",
            instructions=code.instructions("You are a shopping assistant."),
            tools=[code.tool],
            model=RunsTheMessage(),  # any model
        )

        async def turn(user: str, text: str) -> Any:
            return (await Runner.run(agent, text, context={"user": user})).final_output

        await asyncio.gather(turn("alice", "budget = 50"), turn("bob", "budget = 20"))
        print("alice:", await turn("alice", BOOKS))
        print("bob:", await turn("bob", BOOKS))
        # --8<-- [end:sessions]

        # --8<-- [start:approvals]
        waiting = await Runner.run(agent, ORDER, context={"user": "alice"})  # alice's kernel waits
        print("alice:", [item.qualified_name for item in waiting.interruptions], "waits")
        print("bob:", await turn("bob", "print(budget)"))  # bob's kernel is not blocked
        state = waiting.to_state()
        for item in waiting.interruptions:
            state.approve(item)
        done = await Runner.run(agent, state)  # the same kernel goes on
        print("alice:", done.final_output)
        # --8<-- [end:approvals]

        # --8<-- [start:notice]
        await sessions.close_session("bob")  # what the idle timeout does after 900 s
        print("bob:", await turn("bob", "print('budget' in globals())"))
        # --8<-- [end:notice]


if __name__ == "__main__":
    asyncio.run(main())
