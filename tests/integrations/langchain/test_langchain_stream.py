"""``stream_mode="custom"`` receives what the code prints while it runs, as a native tool's stream
writer output (scripted chat model, real kernel, real LangGraph checkpointer)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langgraph.types import Command
from lc_kit import APPROVE, action, config, make_agent, run_code_then_finish, text_of, tool_messages, user

from ipybox_core import CodeExecutor
from ipybox_integrations.langchain import CodeActionMiddleware

pytestmark = pytest.mark.asyncio(loop_scope="package")


def waits_for(go: Path, *, before: str) -> str:
    """Code that prints ``before``, then waits (at most 20 s) until the test creates ``go``."""
    return (
        f"import pathlib, time\nprint({before!r}, flush=True)\n"
        f"for _ in range(400):\n    if pathlib.Path({str(go)!r}).exists(): break\n    time.sleep(0.05)\n"
        "print('go seen' if pathlib.Path(" + repr(str(go)) + ").exists() else 'never saw go')"
    )


async def stream(agent: Any, payload: Any, thread: str, go: Path, trigger: str) -> list[tuple[str, Any]]:
    """Stream one run; create ``go`` as soon as a custom chunk carries ``trigger``."""
    seen: list[tuple[str, Any]] = []
    async for mode, chunk in agent.astream(payload, config(thread), stream_mode=["custom", "updates"]):
        seen.append((mode, chunk))
        if mode == "custom" and trigger in chunk.get("text", ""):
            go.touch()
    return seen


async def test_custom_stream_mode_gets_the_output_while_the_code_runs(
    idle_executor: CodeExecutor, tmp_path: Path
) -> None:
    go = tmp_path / "go"
    _, agent = make_agent(
        [CodeActionMiddleware(idle_executor)], run_code_then_finish(waits_for(go, before="working"))
    )
    seen = await stream(agent, user(), "live", go, "working")
    custom = [chunk for mode, chunk in seen if mode == "custom"]
    assert custom[0] == {
        "type": "execute_code_output",
        "tool_call_id": "call_1_0",
        "stream": "stdout",
        "text": "working\n",
    }
    assert {
        "type": "execute_code_output",
        "tool_call_id": "call_1_0",
        "stream": "stdout",
        "text": "go seen\n",
    } in custom
    state = await agent.aget_state(config("live"))
    assert [text_of(message) for message in tool_messages(state.values)] == ["working\ngo seen"]


async def test_output_after_an_approval_streams_in_the_resumed_run(
    idle_executor: CodeExecutor, tmp_path: Path
) -> None:
    go = tmp_path / "go"
    code = "from mcptools.test import add\nprint('sum', add(a=1, b=2), flush=True)\n" + waits_for(
        go, before="after"
    )
    _, agent = make_agent([CodeActionMiddleware(idle_executor)], run_code_then_finish(code))
    seen = await stream(agent, user(), "live-resume", go, "never")
    (interrupt,) = [
        chunk["__interrupt__"][0] for mode, chunk in seen if mode == "updates" and "__interrupt__" in chunk
    ]
    assert action(interrupt)["name"] == "test.add"
    seen = await stream(agent, Command(resume=APPROVE), "live-resume", go, "after")
    text = "".join(chunk["text"] for mode, chunk in seen if mode == "custom")
    assert text == "sum 3\nafter\ngo seen\n"
