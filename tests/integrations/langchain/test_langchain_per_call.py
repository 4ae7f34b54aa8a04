"""``interrupt_mode="per_call"``: each held MCP call is one ``ToolApprovalRequest`` answered by
interrupt id with one decision, as ``HumanInTheLoopMiddleware(interrupt_mode="per_call")`` asks
(scripted chat model, real kernel, real LangGraph checkpointer)."""

from __future__ import annotations

from typing import Any

import pytest
from langchain.agents.middleware import HumanInTheLoopMiddleware
from lc_kit import (
    config,
    make_agent,
    only_interrupt,
    resume,
    run_code_then_finish,
    text_of,
    tool_messages,
    user,
)

from ipybox_core import CodeExecutor, ConfigError
from ipybox_integrations.langchain import CodeActionMiddleware
from ipybox_integrations.langchain._hitl import EDIT_NOTICE

pytestmark = pytest.mark.asyncio(loop_scope="package")

THREE = "from mcptools.test import add\nprint(add(a=1, b=1), add(a=2, b=2))\ntry:\n    add(a=3, b=3)\nexcept PermissionError as e:\n    print('refused:', e)"


def tool_approval(interrupt: Any) -> dict[str, Any]:
    value: dict[str, Any] = interrupt.value
    assert set(value) == {"type", "tool_call_id", "name", "args", "description"}, value
    assert value["type"] == "tool_approval"
    return value


async def test_each_held_call_is_a_tool_approval_request_answered_by_interrupt_id(
    idle_executor: CodeExecutor,
) -> None:
    middleware = CodeActionMiddleware(
        idle_executor, interrupt_mode="per_call", allowed_decisions=["approve", "edit", "reject"]
    )
    _, agent = make_agent([middleware], run_code_then_finish(THREE))
    first = only_interrupt(await agent.ainvoke(user(), config("per-call"), version="v2"))
    asked = tool_approval(first)
    assert (asked["name"], asked["args"], asked["tool_call_id"]) == ("test.add", {"a": 1, "b": 1}, "call_1_0")
    assert "add(a=1, b=1)" in asked["description"]
    assert first.response_schema is not None  # the allowed decisions, as native per_call publishes them

    with pytest.raises(ValueError, match="validation error"):  # a batched answer: refused, nothing saved
        await resume(agent, "per-call", {first.id: {"decisions": [{"type": "approve"}]}})
    edit = {"type": "edit", "edited_action": {"name": "test.add", "args": {"a": 5, "b": 5}}}
    second = only_interrupt(await resume(agent, "per-call", {first.id: edit}))
    assert tool_approval(second)["args"] == {"a": 2, "b": 2}
    third = only_interrupt(await resume(agent, "per-call", {second.id: {"type": "approve"}}))
    assert tool_approval(third)["args"] == {"a": 3, "b": 3}
    out = await resume(agent, "per-call", {third.id: {"type": "reject", "message": "not three"}})
    assert not out.interrupts
    notice = EDIT_NOTICE.format(name="test.add", args='{"a": 5, "b": 5}')
    (message,) = tool_messages(out.value)
    assert text_of(message) == f"{notice}\n\n10 4\nrefused: test.add was rejected: not three"


async def test_next_to_a_per_call_hitl_gate_every_pause_has_one_shape(idle_executor: CodeExecutor) -> None:
    hitl = HumanInTheLoopMiddleware(interrupt_on={"execute_code": True}, interrupt_mode="per_call")
    code = "from mcptools.test import add\nprint(add(a=5, b=5), add(a=6, b=6))"
    middleware = CodeActionMiddleware(idle_executor, interrupt_mode="per_call")
    _, agent = make_agent([hitl, middleware], run_code_then_finish(code))
    pause = only_interrupt(await agent.ainvoke(user(), config("per-call-gate"), version="v2"))
    names = []
    while True:
        names.append(tool_approval(pause)["name"])
        out = await resume(agent, "per-call-gate", {pause.id: {"type": "approve"}})
        if not out.interrupts:
            break
        pause = only_interrupt(out)
    assert names == ["execute_code", "test.add", "test.add"]
    assert text_of(tool_messages(out.value)[0]) == "10 12"


async def test_an_unknown_interrupt_mode_is_refused(idle_executor: CodeExecutor) -> None:
    with pytest.raises(ConfigError, match="interrupt_mode must be 'batched' or 'per_call'"):
        CodeActionMiddleware(idle_executor, interrupt_mode="each")  # type: ignore[arg-type]
