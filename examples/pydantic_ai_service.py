"""A PydanticAI approval deferred by one process and answered by another, with the agent on ``ipybox serve``.

    python examples/pydantic_ai_service.py

Needs ``pip install -e '.[pydantic-ai]'`` (in the ipybox checkout). Starts ``ipybox serve`` with
the demo shop (see servers/ipybox_service.py), then runs this script twice more, as two separate
processes. Process A runs the agent until its run ends with ``DeferredToolRequests``, saves the
message history and the requests as JSON, and exits. Process B loads them, runs the agent again
with an approval, and the code goes on in the same kernel, with its variables. The stand-in model
of pydantic_ai_sessions.py (no network, no key) runs each user message as code.
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import TypeAdapter
from pydantic_ai import Agent, DeferredToolRequests
from pydantic_ai.messages import ModelMessagesTypeAdapter
from pydantic_ai_sessions import RUNS_THE_MESSAGE
from servers.demo import ORDER
from servers.ipybox_service import run_in_two_processes

from ipybox_core.remote import RemoteSessions
from ipybox_integrations.pydantic_ai import CodeAction, Decision, approval_results, pending_approvals

# --8<-- [start:agent]
REQUESTS = TypeAdapter(DeferredToolRequests)


def make_agent(sessions: RemoteSessions) -> Agent[None, str | DeferredToolRequests]:
    """The same agent in every process, its kernels in the service."""
    return Agent(
        RUNS_THE_MESSAGE,  # any model
        capabilities=[CodeAction(sessions)],  # one kernel per conversation_id, in the service
        output_type=[str, DeferredToolRequests],
    )
    # --8<-- [end:agent]


# --8<-- [start:processes]
async def process_a(url: str, saved: Path) -> None:
    async with RemoteSessions(url) as sessions:  # the token comes from $IPYBOX_MCP_TOKEN
        agent = make_agent(sessions)
        await agent.run("budget = 50", conversation_id="conversation-42")
        result = await agent.run(ORDER, conversation_id="conversation-42")
        assert isinstance(result.output, DeferredToolRequests)  # the kernel waits in the service
        history = ModelMessagesTypeAdapter.dump_python(result.all_messages(), mode="json")
        requests = REQUESTS.dump_python(result.output, mode="json")
        saved.write_text(json.dumps({"history": history, "requests": requests}))  # e.g. in your database
        (approval,) = pending_approvals(result.output)
        print(f"process A: {approval.name} waits for approval; exiting")


async def process_b(url: str, saved: Path) -> None:
    data = json.loads(saved.read_text())
    history = ModelMessagesTypeAdapter.validate_python(data["history"])  # carries the conversation id
    requests = REQUESTS.validate_python(data["requests"])
    async with RemoteSessions(url) as sessions:
        agent = make_agent(sessions)
        (approval,) = pending_approvals(requests)
        print(f"process B: approving {approval.name}")
        answers = approval_results(requests, lambda approval: Decision.approve())
        result = await agent.run(message_history=history, deferred_tool_results=answers)
        print("process B:", result.output)
        # --8<-- [end:processes]


if __name__ == "__main__":
    run_in_two_processes(__file__, process_a, process_b)
