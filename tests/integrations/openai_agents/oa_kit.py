"""Helpers for the OpenAI Agents SDK tests: a scripted outer model and an approval loop."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from agents import Agent, Runner, RunResult, RunState, ToolApprovalItem
from agents.testing import ScriptedModel, assistant_message, function_call

from ipybox_integrations.openai_agents import CodeActionTool

Decide = Callable[[RunState[Any], ToolApprovalItem], None]


def scripted(code: str, *more_codes: str, final: str = "done") -> ScriptedModel:
    """An outer model calling execute_code once per code, then answering ``final``."""
    steps: list[Any] = [
        [function_call("execute_code", {"code": c}, call_id=f"outer-{i}")]
        for i, c in enumerate((code, *more_codes), 1)
    ]
    return ScriptedModel([*steps, [assistant_message(final)]])


def make_agent(code: CodeActionTool, model: ScriptedModel, name: str = "analyst") -> Agent[Any]:
    return Agent(
        name=name, instructions=code.instructions("You are a data analyst."), tools=[code.tool], model=model
    )


def approve(state: RunState[Any], item: ToolApprovalItem) -> None:
    state.approve(item)


async def run_to_end(
    agent: Agent[Any], prompt: str = "go", decide: Decide = approve, **kwargs: Any
) -> tuple[RunResult, list[ToolApprovalItem]]:
    """Run, deciding every interruption with ``decide``; returns the result and all interruptions seen."""
    result = await Runner.run(agent, prompt, **kwargs)
    seen: list[ToolApprovalItem] = []
    while result.interruptions:
        state = result.to_state()
        for item in result.interruptions:
            seen.append(item)
            decide(state, item)
        result = await Runner.run(agent, state, **kwargs)
    return result, seen


def tool_outputs(model: ScriptedModel) -> list[Any]:
    """The function_call_output payloads the outer model received on its last call."""
    last = model.calls[-1].input
    assert isinstance(last, list)
    items = [item if isinstance(item, dict) else item.model_dump() for item in last]
    return [item["output"] for item in items if item.get("type") == "function_call_output"]


def output_text(output: Any) -> str:
    """Text of a tool output (a string or a list of content parts)."""
    if isinstance(output, str):
        return output
    return "".join(part.get("text", "") for part in output if part.get("type") == "input_text")


def call_summary(items: list[ToolApprovalItem]) -> list[tuple[str | None, str | None, Any]]:
    return [(item.tool_namespace, item.tool_name, json.loads(item.arguments or "null")) for item in items]
