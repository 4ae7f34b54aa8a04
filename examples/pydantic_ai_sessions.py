"""One PydanticAI agent, many conversations: each conversation id gets its own kernel.

    python examples/pydantic_ai_sessions.py

Needs ``pip install -e '.[pydantic-ai]'`` (in the ipybox checkout). A stand-in model (no network, no
key) runs each user message as code and answers with the result. Two conversations set different
budgets side by side and query the demo shop with them; one conversation's MCP call waits for
approval while the other goes on; then one conversation's kernel is closed (as the idle timeout
would close it) and its next result starts with the restart notice.
"""

from __future__ import annotations

import asyncio
import uuid

from pydantic_ai import (
    Agent,
    DeferredToolRequests,
    ModelMessage,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from servers.demo import BOOKS, ORDER, SHOP

from ipybox_core import Sessions
from ipybox_integrations.pydantic_ai import CodeAction, Decision, approval_results, pending_approvals


def runs_the_message(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Stands in for a model: the user's message is the code; the tool's result is the answer."""
    part = messages[-1].parts[-1]
    if isinstance(part, UserPromptPart):
        call = ToolCallPart("execute_code", {"code": part.content}, tool_call_id=f"call_{uuid.uuid4().hex}")
        return ModelResponse(parts=[call])
    assert isinstance(part, ToolReturnPart)
    return ModelResponse(parts=[TextPart(part.model_response_str().strip())])


RUNS_THE_MESSAGE = FunctionModel(runs_the_message)


async def main() -> None:
    # --8<-- [start:sessions]
    async with Sessions(
        mcp_servers={"shop": SHOP},
        approval=lambda request: True if request.annotations.read_only_hint else None,  # others: asked
        idle_timeout=900,  # seconds without use before a conversation's kernel is closed
    ) as sessions:
        agent = Agent(
            RUNS_THE_MESSAGE,  # any model
            capabilities=[CodeAction(sessions)],  # one kernel per conversation_id
            output_type=[str, DeferredToolRequests],
        )

        async def turn(conversation_id: str, text: str) -> str | DeferredToolRequests:
            return (await agent.run(text, conversation_id=conversation_id)).output

        await asyncio.gather(turn("alice", "budget = 50"), turn("bob", "budget = 20"))
        print("alice:", await turn("alice", BOOKS))
        print("bob:", await turn("bob", BOOKS))
        # --8<-- [end:sessions]

        # --8<-- [start:approvals]
        waiting = await agent.run(ORDER, conversation_id="alice")  # alice's kernel waits for approval
        assert isinstance(waiting.output, DeferredToolRequests)
        print("alice:", [approval.name for approval in pending_approvals(waiting.output)], "waits")
        print("bob:", await turn("bob", "print(budget)"))  # bob's kernel is not blocked
        answers = approval_results(waiting.output, lambda approval: Decision.approve())
        # the history carries the conversation id "alice": the same kernel goes on
        done = await agent.run(message_history=waiting.all_messages(), deferred_tool_results=answers)
        print("alice:", done.output)
        # --8<-- [end:approvals]

        # --8<-- [start:notice]
        await sessions.close_session("bob")  # what the idle timeout does after 900 s
        print("bob:", await turn("bob", "print('budget' in globals())"))
        # --8<-- [end:notice]


if __name__ == "__main__":
    asyncio.run(main())
