"""Simple mode, streaming, images, instructions, the shell, a dying kernel, the missing-SDK error."""

from __future__ import annotations

import asyncio
import base64
import os
import signal
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, Runner, RunState, ToolApprovalItem
from oa_kit import make_agent, run_to_end, scripted, tool_outputs

from ipybox_core import ApprovalRequest, CodeExecutor, ExecutionEvent, OutputChunk
from ipybox_integrations._session import KERNEL_GUIDE
from ipybox_integrations.openai_agents import CodeActionTool
from servers.tools import solid_png

pytestmark = pytest.mark.asyncio(loop_scope="package")


async def test_simple_mode_approves_each_code_block_once(idle_executor: CodeExecutor) -> None:
    code = CodeActionTool(idle_executor, code_needs_approval=True, needs_approval=False)
    block = (
        "from mcptools.test import add\nsimple_total = add(a=2, b=3) + add(a=10, b=20)\nprint(simple_total)"
    )
    model = scripted(block)
    agent = make_agent(code, model)

    result = await Runner.run(agent, "go")
    [item] = result.interruptions
    assert (item.tool_name, item.tool_namespace) == ("execute_code", None)
    assert code.is_code_approval(item)
    assert code.describe(item) == f"The agent wants to run this code:\n{block}"
    state = result.to_state()
    state.approve(item)
    result = await Runner.run(agent, state)

    assert not result.interruptions  # the MCP calls follow the executor's policy: accepted
    assert tool_outputs(model) == ["35"]


async def test_simple_mode_rejection_runs_nothing(idle_executor: CodeExecutor) -> None:
    code = CodeActionTool(idle_executor, code_needs_approval=True, needs_approval=False)
    model = scripted("rejected_block_ran = True")

    def reject(state: RunState[Any], item: ToolApprovalItem) -> None:
        state.reject(item, rejection_message="not this code")

    await run_to_end(make_agent(code, model), decide=reject)

    assert tool_outputs(model) == ["not this code"]
    assert (await idle_executor.execute("'rejected_block_ran' in globals()")).text.strip() == "False"


async def test_code_approval_then_mcp_approvals(idle_executor: CodeExecutor) -> None:
    code = CodeActionTool(idle_executor, code_needs_approval=True)
    model = scripted("from mcptools.test import add\nprint(add(a=1, b=1))")
    _, seen = await run_to_end(make_agent(code, model))
    assert [(item.tool_name, code.is_code_approval(item)) for item in seen] == [
        ("execute_code", True),
        ("add", False),
    ]
    assert tool_outputs(model) == ["2"]


async def test_streamed_runs_and_live_events(idle_executor: CodeExecutor) -> None:
    events: list[ExecutionEvent] = []
    code = CodeActionTool(idle_executor, on_event=events.append)
    model = scripted(
        "from mcptools.test import add, echo\nprint('before')\nprint(add(a=1, b=2))\nprint(echo(message='after'))"
    )
    agent = make_agent(code, model)

    stream = Runner.run_streamed(agent, "go")
    approvals: list[str | None] = []
    stream_names: list[str] = []
    while True:
        async for event in stream.stream_events():
            if event.type == "run_item_stream_event":
                stream_names.append(event.name)
        if not stream.interruptions:
            break
        approvals.extend(item.qualified_name for item in stream.interruptions)
        state = stream.to_state()
        for item in stream.interruptions:
            state.approve(item)
        stream = Runner.run_streamed(agent, state)

    assert approvals == ["test.add", "test.echo"]
    assert stream.final_output == "done"
    assert "tool_called" in stream_names and "tool_output" in stream_names
    assert tool_outputs(model) == ["before\n3\nafter"]
    # live events, as they happen (output printed just before a call can still arrive after the
    # call's approval request while the application is busy: they travel on different channels)
    kinds = [
        f"approval:{event.name}" if isinstance(event, ApprovalRequest) else type(event).__name__
        for event in events
        if not isinstance(event, OutputChunk)
    ]
    assert kinds == ["approval:test.add", "ToolCall", "approval:test.echo", "ToolCall", "ExecutionResult"]
    printed = "".join(event.text for event in events if isinstance(event, OutputChunk))
    assert printed == "before\n3\nafter\n"


async def test_images_are_returned_as_tool_output_images(idle_executor: CodeExecutor) -> None:
    png = solid_png(3, 2, (0, 0, 255))
    code = CodeActionTool(idle_executor, image_detail="low")
    model = scripted(
        "import base64\nfrom IPython.display import Image, display\n"
        f"display(Image(data=base64.b64decode({base64.b64encode(png).decode()!r})))\nprint('shown')"
    )
    await run_to_end(make_agent(code, model))

    [output] = tool_outputs(model)
    assert [part["type"] for part in output] == ["input_text", "input_image"]
    assert output[0]["text"] == "shown"
    assert output[1]["detail"] == "low"
    prefix = "data:image/png;base64,"
    assert output[1]["image_url"].startswith(prefix)
    assert base64.b64decode(output[1]["image_url"][len(prefix) :]) == png


async def test_instructions_contain_the_api_reference(idle_executor: CodeExecutor) -> None:
    code = CodeActionTool(idle_executor)
    model = scripted("print('hi')")

    async def base(context: Any, agent: Agent[Any]) -> str:
        return f"You help {context.context['user']}."

    agent = Agent(name="analyst", instructions=code.instructions(base), tools=[code.tool], model=model)
    await run_to_end(agent, context={"user": "alice"})

    prompt = model.calls[0].system_instructions or ""
    assert prompt.startswith("You help alice.\n\n")
    assert KERNEL_GUIDE in prompt
    assert idle_executor.api_reference() in prompt
    assert "def add(" in prompt and "mcptools.test" in prompt
    [tool] = model.calls[0].tools
    assert tool.name == "execute_code"
    assert list(tool.params_json_schema["properties"]) == ["code"]
    assert code.prompt() in prompt


async def test_shell_approval_and_a_kernel_dying_while_waiting(tmp_path: Path) -> None:
    """A shell command waits as the bare tool ``shell``; the kernel dies; the resume says so."""
    async with CodeExecutor(workspace=tmp_path, approve_shell=True, timeout=60) as executor:
        pid = int((await executor.execute("import os; os.getpid()")).text)
        code = CodeActionTool(executor)
        model = scripted("!echo from-the-shell")
        agent = make_agent(code, model)
        waiting = await Runner.run(agent, "go")
        [item] = waiting.interruptions
        assert (item.tool_name, item.tool_namespace, item.arguments) == (
            "shell",
            None,
            '{"command": "echo from-the-shell"}',
        )

        os.kill(pid, signal.SIGKILL)
        state = waiting.to_state()
        state.approve(item)
        result = await Runner.run(agent, state)

        assert result.final_output == "done"
        assert "the kernel died" in tool_outputs(model)[0]
        assert not executor.busy
        assert (await executor.execute("print('alive again')")).text.strip() == "alive again"


async def test_a_decision_after_the_approval_timeout(tmp_path: Path) -> None:
    """The executor's approval_timeout rejected the call meanwhile: a late approval changes nothing."""
    async with CodeExecutor(
        workspace=tmp_path, approve_shell=True, approval_timeout=0.2, timeout=60
    ) as executor:
        code = CodeActionTool(executor)
        model = scripted(
            "try:\n    !echo too-late\nexcept PermissionError as error:\n    print('rejected:', error)"
        )
        agent = make_agent(code, model)
        waiting = await Runner.run(agent, "go")
        [item] = waiting.interruptions
        request = code.request_for(item)
        assert request is not None
        while request.pending:  # until the executor's approval timeout rejects it
            await asyncio.sleep(0.05)

        state = waiting.to_state()
        state.approve(item)
        result = await Runner.run(agent, state)

        assert result.final_output == "done"
        assert tool_outputs(model) == [
            "rejected: shell command rejected: approval timed out after 0.2 s without a decision"
        ]
