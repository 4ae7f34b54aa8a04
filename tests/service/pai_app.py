"""A PydanticAI application process on an ipybox service.

``start URL FILE [hold]``: run until ipybox asks for approval, save the message history and the
deferred requests as JSON to FILE, print ``PARKED`` (and with ``hold``, wait to be killed).
``answer URL FILE approve|reject|abort``: load FILE and resume the run with that decision; print ``OUTPUT``.
``moveon URL FILE``: a new run of the same conversation that ignores what waits (no history, no
answer); print ``OUTPUT``.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parents[1] / "integrations" / "pydantic_ai"))
sys.path.insert(0, str(Path(__file__).parents[1]))

from pai_kit import ScriptedModel
from pydantic import TypeAdapter
from pydantic_ai import Agent, AgentRunResult, DeferredToolRequests
from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter
from service_kit import conversation_key, counting_steps

from ipybox_core.remote import RemoteSessions
from ipybox_integrations.pydantic_ai import CodeAction, Decision, approval_results

REQUESTS = TypeAdapter(DeferredToolRequests)


def save_run(result: AgentRunResult[Any], file: Path) -> None:
    """Save a run that stopped at ``DeferredToolRequests``: its messages and the requests."""
    saved = {
        "history": ModelMessagesTypeAdapter.dump_python(result.all_messages(), mode="json"),
        "requests": REQUESTS.dump_python(result.output, mode="json"),
    }
    file.write_text(json.dumps(saved))


def load_run(file: Path) -> tuple[list[ModelMessage], DeferredToolRequests]:
    """The messages and the requests :func:`save_run` saved."""
    saved = json.loads(file.read_text())
    return ModelMessagesTypeAdapter.validate_python(saved["history"]), REQUESTS.validate_python(
        saved["requests"]
    )


async def main(role: str, url: str, file: Path, extra: str) -> None:
    conversation = conversation_key("pai-conversation-1")
    model = ScriptedModel(counting_steps(conversation))
    async with RemoteSessions(url, client_name=f"pai-{role}") as sessions:
        agent = Agent(
            model.model, capabilities=[CodeAction(sessions)], output_type=[str, DeferredToolRequests]
        )
        if role == "start":
            result = await agent.run("go", conversation_id=conversation)
            assert isinstance(result.output, DeferredToolRequests), result.output
            save_run(result, file)
            print("PARKED", flush=True)
            if extra == "hold":
                await asyncio.Event().wait()
            return
        if role == "moveon":
            moved = ScriptedModel(["print('free', state)"])
            agent = Agent(
                moved.model, capabilities=[CodeAction(sessions)], output_type=[str, DeferredToolRequests]
            )
            result = await agent.run("never mind that", conversation_id=conversation)
            print("OUTPUT", json.dumps(result.output), flush=True)
            return
        history, requests = load_run(file)
        decisions = {"approve": Decision.approve(), "abort": Decision.abort("stop: the user aborted")}
        decision = decisions.get(extra, Decision.reject("not now"))
        results = approval_results(requests, lambda approval: decision)
        result = await agent.run(
            message_history=history, deferred_tool_results=results, conversation_id=conversation
        )
        print("OUTPUT", json.dumps(result.output), flush=True)


async def run(argv: list[str]) -> None:
    """The process's work for its command line ``argv`` (without the script)."""
    await main(argv[0], argv[1], Path(argv[2]), argv[3] if len(argv) > 3 else "")


if __name__ == "__main__":
    asyncio.run(run(sys.argv[1:]))
