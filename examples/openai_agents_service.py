"""An OpenAI Agents SDK run interrupted in one process and resumed in another, on ``ipybox serve``.

    python examples/openai_agents_service.py

Needs ``pip install -e '.[openai-agents]'`` (in the ipybox checkout). Starts ``ipybox serve`` with
the demo shop (see servers/ipybox_service.py), then runs this script twice more, as two separate
processes. Process A runs the agent until its code's MCP call interrupts the run, saves the
``RunState`` as JSON, and exits. Process B restores it, approves, resumes the run, and the code goes
on in the same kernel, with its variables. The stand-in model of openai_agents_sessions.py (no
network, no key) runs each user message as code.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agents import Agent, Runner, RunState, set_tracing_disabled
from openai_agents_sessions import RunsTheMessage
from servers.demo import ORDER
from servers.ipybox_service import run_in_two_processes

from ipybox_core.remote import RemoteSessions
from ipybox_integrations.openai_agents import CodeActionTool

set_tracing_disabled(True)  # the SDK exports traces to OpenAI by default


# --8<-- [start:agent]
def make_agent(sessions: RemoteSessions) -> Agent[Any]:
    """The same agent in every process, its kernels in the service."""
    code = CodeActionTool(sessions, key=lambda ctx: ctx.context["conversation"])  # one kernel each
    return Agent(
        name="shop_assistant",
        instructions=code.instructions("You are a shopping assistant."),
        tools=[code.tool],
        model=RunsTheMessage(),  # any model
    )


CONTEXT = {"conversation": "conversation-42"}
# --8<-- [end:agent]


# --8<-- [start:processes]
async def process_a(url: str, saved: Path) -> None:
    async with RemoteSessions(url) as sessions:  # the token comes from $IPYBOX_MCP_TOKEN
        agent = make_agent(sessions)
        await Runner.run(agent, "budget = 50", context=CONTEXT)
        result = await Runner.run(agent, ORDER, context=CONTEXT)
        (item,) = result.interruptions  # the kernel waits in the service
        saved.write_text(json.dumps(result.to_state().to_json()))  # e.g. in your database
        print(f"process A: {item.qualified_name} waits for approval; exiting")


async def process_b(url: str, saved: Path) -> None:
    async with RemoteSessions(url) as sessions:
        agent = make_agent(sessions)
        state = await RunState.from_json(agent, json.loads(saved.read_text()))  # with its context
        for item in state.get_interruptions():
            print(f"process B: approving {item.qualified_name}")
            state.approve(item)  # or state.reject(item, rejection_message="...")
        result = await Runner.run(agent, state)
        print("process B:", result.final_output)
        # --8<-- [end:processes]


if __name__ == "__main__":
    run_in_two_processes(__file__, process_a, process_b)
