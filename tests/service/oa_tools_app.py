"""An OpenAI Agents application process whose agent's own function tools the code calls, on an
ipybox service.

``start URL STATE LOG``: run until the code's first ``refund`` (``needs_approval=True``) interrupts
the run; save the ``RunState`` to STATE, print ``PARKED``. ``answer URL STATE LOG``: restore it
and approve every interruption until the run ends; print ``OUTPUT`` with what execute_code
returned. Each tool appends ``<tool> <argument> <pid>`` to LOG when it runs.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

os.environ["OPENAI_AGENTS_DISABLE_TRACING"] = "1"  # read once by the SDK: no trace export, ever
sys.path.insert(0, str(Path(__file__).parents[1] / "integrations" / "openai_agents"))
sys.path.insert(0, str(Path(__file__).parents[1]))

from agents import Agent, RunContextWrapper, Runner, RunState, function_tool, set_tracing_disabled
from agents.testing import ScriptedModel, assistant_message
from oa_kit import output_text, scripted, tool_outputs
from service_kit import conversation_key

from ipybox_core.remote import RemoteSessions
from ipybox_integrations.openai_agents import CodeActionTool
from servers.agent_tools_cells import CALLS_CELL

set_tracing_disabled(True)


def clerk(code: CodeActionTool, model: ScriptedModel, log: Path) -> Agent[Any]:
    def ran(tool: str, argument: str) -> None:
        with log.open("a") as file:
            file.write(f"{tool} {argument} {os.getpid()}\n")

    @function_tool(needs_approval=True)
    def refund(order: str) -> str:
        """Refund an order."""
        ran("refund", order)
        return f"refunded {order}"

    @function_tool
    def whoami(ctx: RunContextWrapper[dict[str, str]]) -> dict[str, str]:
        """The signed-in user."""
        ran("whoami", ctx.context["user"])
        return {"user": ctx.context["user"]}

    @function_tool
    def lookup(order: str) -> dict[str, str]:
        """Look an order up."""
        ran("lookup", order)
        raise ValueError(f"no order {order}")

    return Agent(
        name="clerk",
        instructions=code.instructions("You are a clerk."),
        tools=[code, refund, whoami, lookup],
        model=model,
    )


async def main(role: str, url: str, state_file: Path, log: Path) -> None:
    async with RemoteSessions(url, client_name=f"oa-tools-{role}") as sessions:
        conversation = conversation_key("oa-tools-conversation-1")
        code = CodeActionTool(sessions, key=lambda ctx: conversation)
        if role == "start":
            result = await Runner.run(clerk(code, scripted(CALLS_CELL), log), "go", context={"user": "carol"})
            assert result.interruptions, result.final_output
            state_file.write_text(json.dumps(result.to_state().to_json()))
            print("PARKED", flush=True)
            return
        model = ScriptedModel([[assistant_message("done")]])  # A's model made the calls before it
        agent = clerk(code, model, log)
        state = await RunState.from_json(agent, json.loads(state_file.read_text()))
        while True:
            for item in state.get_interruptions():
                state.approve(item)
            result = await Runner.run(agent, state)
            if not result.interruptions:
                break
            state = result.to_state()
        print("OUTPUT", json.dumps(output_text(tool_outputs(model)[0])), flush=True)


async def run(argv: list[str]) -> None:
    """The process's work for its command line ``argv`` (without the script)."""
    await main(argv[0], argv[1], Path(argv[2]), Path(argv[3]))


if __name__ == "__main__":
    asyncio.run(run(sys.argv[1:]))
