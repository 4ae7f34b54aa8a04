"""The execute_code tool: kernel state, images, errors, timeouts, instructions, executor ownership."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pai_kit import ScriptedModel, returns_of, text_of
from pydantic_ai import Agent, BinaryContent, DeferredToolRequests, ToolReturnPart
from pydantic_ai.capabilities import HandleDeferredToolCalls

from ipybox_core import CodeExecutor, ExecutorClosed
from ipybox_integrations.pydantic_ai import CodeAction, approval_results

pytestmark = pytest.mark.asyncio(loop_scope="package")

ONE_PIXEL_PNG = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)
SHOW_IMAGE = f"""\
import base64
from IPython.display import Image, display
display(Image(data=base64.b64decode("{ONE_PIXEL_PNG}")))
print("shown")
"""


def approve_all(ctx: Any, requests: DeferredToolRequests) -> Any:
    return approval_results(requests, lambda a: True)


def agent_for(executor: CodeExecutor, model: ScriptedModel, **options: Any) -> Agent[None, Any]:
    code_action = CodeAction(executor, **options)
    return Agent(model.model, capabilities=[code_action, HandleDeferredToolCalls(handler=approve_all)])


async def test_state_persists_across_execute_code_calls(executor: CodeExecutor) -> None:
    model = ScriptedModel(["counter_pai = 40", "counter_pai += 2\nprint(counter_pai)"])
    result = await agent_for(executor, model).run("go")
    assert [text_of(part) for part in returns_of(result)] == ["(no output)", "42"]


async def test_images_come_back_to_the_model_as_png_content(executor: CodeExecutor) -> None:
    model = ScriptedModel([SHOW_IMAGE])
    await agent_for(executor, model).run("go")
    (returned,) = [p for m in model.histories[-1] for p in m.parts if isinstance(p, ToolReturnPart)]
    assert isinstance(returned.content, list)
    text, image = returned.content
    assert text == "shown"
    assert isinstance(image, BinaryContent)
    assert image.media_type == "image/png"
    assert image.data.startswith(b"\x89PNG\r\n\x1a\n")
    assert returned.metadata == {
        "execution_count": returned.metadata["execution_count"],
        "error": None,
        "images": 1,
    }


async def test_code_errors_return_a_traceback_and_the_model_can_retry(executor: CodeExecutor) -> None:
    model = ScriptedModel(["print('partial')\n1 / 0", "print('fixed', 1 / 1)"])
    result = await agent_for(executor, model).run("go")
    failed, fixed = returns_of(result)
    assert failed.outcome == "success"  # a readable result, not a crashed run or a retry prompt
    assert text_of(failed).startswith("partial\n")
    assert "ZeroDivisionError" in text_of(failed)
    assert "1 / 0" in text_of(failed)
    assert text_of(fixed) == "fixed 1.0"


async def test_timeout_interrupts_the_code_and_keeps_the_state(executor: CodeExecutor) -> None:
    model = ScriptedModel(["import time\nbefore_sleep = 'kept'\ntime.sleep(30)", "print(before_sleep)"])
    result = await agent_for(executor, model, timeout=0.5).run("go")
    timed_out, after = (text_of(part) for part in returns_of(result))
    assert "timed out" in timed_out
    assert after == "kept"


async def test_the_model_sees_one_tool_and_the_api_reference(executor: CodeExecutor) -> None:
    model = ScriptedModel(["1"])
    await agent_for(executor, model).run("go")
    info = model.infos[0]
    (tool,) = info.function_tools
    assert tool.name == "execute_code"
    assert set(tool.parameters_json_schema["properties"]) == {"code"}  # the application sets limits
    assert tool.parameters_json_schema["required"] == ["code"]
    assert "stateful IPython kernel" in (tool.description or "")
    assert info.instructions is not None
    assert executor.api_reference().strip() in info.instructions
    assert "def add(*, a: int, b: int) -> int:" in info.instructions


async def test_instructions_follow_servers_registered_later(
    executor: CodeExecutor, clean_raw_server_config: dict[str, Any]
) -> None:
    model = ScriptedModel(["1", "2"])
    agent = agent_for(executor, model)
    await agent.run("go")
    assert "mcptools.rawpai" not in (model.infos[-1].instructions or "")
    await executor.register_mcp_server("rawpai", clean_raw_server_config)
    try:
        await agent.run("again")
        assert "from mcptools.rawpai import" in (model.infos[-1].instructions or "")
    finally:
        await executor.unregister_mcp_server("rawpai")


async def test_an_owned_executor_starts_with_the_first_run_and_closes_with_aclose(
    tmp_path: Path, clean_raw_server_config: dict[str, Any]
) -> None:
    code_action = CodeAction(mcp_servers={"raw": clean_raw_server_config}, workspace=tmp_path / "ws")
    model = ScriptedModel(
        ["from mcptools.raw import echo\nprint(echo(text='hi'))", "import os\nos._exit(3)", "1 + 1"]
    )
    agent = Agent(model.model, capabilities=[code_action, HandleDeferredToolCalls(handler=approve_all)])
    try:
        result = await agent.run("go")
        echoed, died, after = (text_of(part) for part in returns_of(result))
        assert echoed == "hi"
        assert died.startswith("Error: the kernel died")  # told to the model; the run goes on
        assert after == "2"  # in a fresh kernel
        assert "from mcptools.raw import" in (model.infos[0].instructions or "")
        assert code_action.executor.workspace == (tmp_path / "ws").resolve()
    finally:
        await code_action.aclose()
    with pytest.raises(ExecutorClosed):
        code_action.executor.stream("1")


async def test_async_with_starts_and_closes_an_owned_executor(tmp_path: Path) -> None:
    async with CodeAction(workspace=tmp_path) as code_action:
        assert (await code_action.executor.execute("6 * 7")).to_text() == "42"
    with pytest.raises(ExecutorClosed):
        code_action.executor.stream("1")


async def test_shell_commands_are_approved_like_mcp_calls(tmp_path: Path) -> None:
    seen: list[tuple[str, dict[str, Any], str]] = []

    def handler(ctx: Any, requests: DeferredToolRequests) -> Any:
        seen.extend(
            (c.tool_name, c.args_as_dict(), requests.metadata[c.tool_call_id]["kind"])
            for c in requests.approvals
        )
        return approval_results(requests, lambda a: "allowed" in a.args["command"])

    model = ScriptedModel(
        ["!echo allowed\ntry:\n    !echo refused\nexcept PermissionError as error:\n    print('no:', error)"]
    )
    async with CodeAction(workspace=tmp_path, approve_shell=True) as code_action:
        agent = Agent(model.model, capabilities=[code_action, HandleDeferredToolCalls(handler=handler)])
        result = await agent.run("go")
    assert seen == [
        ("shell", {"command": "echo allowed"}, "shell"),
        ("shell", {"command": "echo refused"}, "shell"),
    ]
    assert result.output.startswith("done: allowed\nno: ")
