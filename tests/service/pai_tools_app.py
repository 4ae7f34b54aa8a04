"""A PydanticAI application process whose agent's own tools the code calls, on an ipybox service.

``start URL STATE LOG``: run until ipybox asks for approval (the code's first ``refund``), save the
message history and the deferred requests to STATE, print ``PARKED``. ``answer URL STATE LOG``: load
STATE and approve every request until the run ends; print ``OUTPUT``. Each tool appends
``<tool> <argument> <pid>`` to LOG when it runs, so a test sees which process ran it, how often.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1] / "integrations" / "pydantic_ai"))
sys.path.insert(0, str(Path(__file__).parents[1]))
sys.path.insert(0, str(Path(__file__).parent))

from pai_app import load_run, save_run
from pai_kit import ScriptedModel
from pydantic_ai import Agent, DeferredToolRequests, ModelRetry, RunContext
from service_kit import conversation_key

from ipybox_core.remote import RemoteSessions
from ipybox_integrations.pydantic_ai import CodeAction
from servers.agent_tools_cells import CALLS_CELL


def clerk(sessions: RemoteSessions, log: Path) -> Agent[dict[str, str], str | DeferredToolRequests]:
    """The agent of ``tests/integrations/pydantic_ai``'s agent-tools tests, logging each run."""

    def ran(tool: str, argument: str) -> None:
        with log.open("a") as file:
            file.write(f"{tool} {argument} {os.getpid()}\n")

    agent = Agent(
        ScriptedModel([CALLS_CELL]).model,
        deps_type=dict[str, str],
        capabilities=[CodeAction(sessions)],
        output_type=[str, DeferredToolRequests],
    )

    @agent.tool_plain(requires_approval=True)
    def refund(order: str) -> str:
        """Refund an order."""
        ran("refund", order)
        return f"refunded {order}"

    @agent.tool
    def whoami(ctx: RunContext[dict[str, str]]) -> dict[str, str]:
        """The signed-in user."""
        ran("whoami", ctx.deps["user"])
        return {"user": ctx.deps["user"]}

    @agent.tool_plain
    def lookup(order: str) -> dict[str, str]:
        """Look an order up."""
        ran("lookup", order)
        if not order.startswith("A-"):
            raise ModelRetry(f"no order {order}: order ids start with A-")
        return {"order": order, "status": "delivered"}

    return agent


async def main(role: str, url: str, state: Path, log: Path) -> None:
    conversation = conversation_key("pai-tools-conversation-1")
    async with RemoteSessions(url, client_name=f"pai-tools-{role}") as sessions:
        agent = clerk(sessions, log)
        if role == "start":
            result = await agent.run("go", deps={"user": "carol"}, conversation_id=conversation)
            assert isinstance(result.output, DeferredToolRequests), result.output
            save_run(result, state)
            print("PARKED", flush=True)
            return
        history, requests = load_run(state)
        output: str | DeferredToolRequests = requests
        while isinstance(output, DeferredToolRequests):
            result = await agent.run(
                message_history=history,
                deferred_tool_results=output.build_results(approve_all=True),
                deps={"user": "dave"},
                conversation_id=conversation,
            )
            history, output = result.all_messages(), result.output
        print("OUTPUT", json.dumps(output), flush=True)


async def run(argv: list[str]) -> None:
    """The process's work for its command line ``argv`` (without the script)."""
    await main(argv[0], argv[1], Path(argv[2]), Path(argv[3]))


if __name__ == "__main__":
    asyncio.run(run(sys.argv[1:]))
