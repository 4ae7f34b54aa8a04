"""An OpenAI Agents SDK application process on an ipybox service.

``start URL FILE [hold]``: run until ipybox asks for approval, save the ``RunState`` as JSON to FILE,
print ``PARKED`` with the interruptions (and with ``hold``, wait to be killed).
``answer URL FILE approve|reject``: restore the ``RunState`` from FILE, decide its interruptions and
resume the run; print ``OUTPUT`` with what execute_code returned to the model and the final output.
``moveon URL FILE``: a new run of the same conversation that ignores the saved state; print
``OUTPUT`` likewise.
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

from agents import Runner, RunState, set_tracing_disabled
from agents.testing import ScriptedModel, assistant_message
from oa_kit import call_summary, make_agent, output_text, scripted, tool_outputs
from service_kit import conversation_key, counting_steps

from ipybox_core.remote import RemoteSessions
from ipybox_integrations.openai_agents import CodeActionTool

set_tracing_disabled(True)


def conversation(context: Any) -> str:
    return str(context.context["conversation"])


def context() -> dict[str, str]:
    return {"conversation": conversation_key("oa-conversation-1")}


async def main(role: str, url: str, file: Path, extra: str) -> None:
    async with RemoteSessions(url, client_name=f"oa-{role}") as sessions:
        code = CodeActionTool(sessions, key=conversation)
        if role == "start":
            agent = make_agent(code, scripted(*counting_steps(context()["conversation"])))
            result = await Runner.run(agent, "go", context=context())
            assert result.interruptions, [output_text(o) for o in tool_outputs(agent.model)]
            file.write_text(json.dumps(result.to_state().to_json()))
            print("PARKED", json.dumps(call_summary(result.interruptions)), flush=True)
            if extra == "hold":
                await asyncio.Event().wait()
            return
        if role == "moveon":
            model = scripted("print('free', state)", final="done")
            result = await Runner.run(make_agent(code, model), "never mind that", context=context())
            summary = {"outputs": [output_text(o) for o in tool_outputs(model)], "final": result.final_output}
            print("OUTPUT", json.dumps({**summary, "interruptions": []}), flush=True)
            return
        model = ScriptedModel([[assistant_message("done")]])  # A's model made the calls before it
        agent = make_agent(code, model)
        state = await RunState.from_json(agent, json.loads(file.read_text()))
        for item in state.get_interruptions():
            if extra == "approve":
                state.approve(item)
            else:
                state.reject(item, rejection_message="not now")
        result = await Runner.run(agent, state)
        outputs = [output_text(output) for output in tool_outputs(model)]
        summary = {
            "outputs": outputs,
            "final": result.final_output,
            "interruptions": call_summary(result.interruptions),
        }
        print("OUTPUT", json.dumps(summary), flush=True)


async def run(argv: list[str]) -> None:
    """The process's work for its command line ``argv`` (without the script)."""
    await main(argv[0], argv[1], Path(argv[2]), argv[3] if len(argv) > 3 else "")


if __name__ == "__main__":
    asyncio.run(run(sys.argv[1:]))
