"""What the model gets back from execute_code: text, images, tracebacks, failures, busy refusals."""

from __future__ import annotations

import base64

import pytest
from langchain_core.messages import AIMessage, BaseMessage
from lc_kit import (
    APPROVE,
    config,
    make_agent,
    only_interrupt,
    resume,
    run_code_then_finish,
    text_of,
    tool_messages,
    user,
)

from ipybox_core import CodeExecutor
from ipybox_integrations.langchain import CodeActionMiddleware
from servers.tools import solid_png

pytestmark = pytest.mark.asyncio(loop_scope="package")


async def test_displayed_images_come_back_as_image_content_blocks(idle_executor: CodeExecutor) -> None:
    png = solid_png(3, 2, (0, 0, 255))
    code = (
        "import base64\nfrom IPython.display import Image, display\n"
        f"display(Image(data=base64.b64decode({base64.b64encode(png).decode()!r})))\nprint('shown')"
    )
    _, agent = make_agent([CodeActionMiddleware(idle_executor)], run_code_then_finish(code))
    out = await agent.ainvoke(user(), config("image"), version="v2")
    (message,) = tool_messages(out.value)
    assert message.status == "success"
    text, image = message.content
    assert isinstance(text, dict) and text["type"] == "text" and text["text"] == "shown"
    assert isinstance(image, dict) and image["type"] == "image" and image["mime_type"] == "image/png"
    assert base64.b64decode(image["base64"]) == png


async def test_a_code_error_reaches_the_model_as_a_readable_traceback(idle_executor: CodeExecutor) -> None:
    code = "print('before')\ndef ratio(x):\n    return x / 0\nratio(3)"
    _, agent = make_agent([CodeActionMiddleware(idle_executor)], run_code_then_finish(code))
    out = await agent.ainvoke(user(), config("error"), version="v2")
    (message,) = tool_messages(out.value)
    assert message.status == "error"
    text = text_of(message)
    assert text.startswith("before\n")
    assert "ZeroDivisionError" in text and "ratio" in text and "\x1b[" not in text
    # the kernel is usable afterwards and kept its state
    assert (await idle_executor.execute("print(ratio.__name__)")).text.strip() == "ratio"


async def test_a_timeout_is_reported_and_the_kernel_stays_usable(idle_executor: CodeExecutor) -> None:
    code = "import time\nslow_marker = 1\ntime.sleep(30)"
    _, agent = make_agent([CodeActionMiddleware(idle_executor, timeout=0.5)], run_code_then_finish(code))
    out = await agent.ainvoke(user(), config("timeout"), version="v2")
    (message,) = tool_messages(out.value)
    assert message.status == "error"
    assert "timed out" in text_of(message)
    assert (await idle_executor.execute("print(slow_marker)")).text.strip() == "1"


async def test_state_persists_between_execute_code_calls(idle_executor: CodeExecutor) -> None:
    def script(messages: list[BaseMessage]) -> AIMessage:
        results = [m for m in messages if m.type == "tool"]
        if len(results) == 2:
            return AIMessage(content="done")
        code = "counter_state = 41" if not results else "print(counter_state + 1)"
        call = {
            "name": "execute_code",
            "args": {"code": code},
            "id": f"call_{len(results)}",
            "type": "tool_call",
        }
        return AIMessage(content="", tool_calls=[call])

    _, agent = make_agent([CodeActionMiddleware(idle_executor)], script)
    out = await agent.ainvoke(user(), config("state"), version="v2")
    assert [text_of(m) for m in tool_messages(out.value)] == ["(no output)", "42"]


async def test_parallel_execute_code_calls_are_refused_while_one_waits(idle_executor: CodeExecutor) -> None:
    code = "from mcptools.test import add\nprint(add(a=1, b=1))"
    _, agent = make_agent([CodeActionMiddleware(idle_executor)], run_code_then_finish(code, code))
    out = await agent.ainvoke(user(), config("parallel"), version="v2")
    only_interrupt(out)  # one pending approval, so a plain resume works
    out = await resume(agent, "parallel", APPROVE)
    assert not out.interrupts
    messages = sorted(tool_messages(out.value), key=lambda m: m.status)
    assert [m.status for m in messages] == ["error", "success"]
    assert "do not call it in parallel" in text_of(messages[0])
    assert text_of(messages[1]) == "2"


async def test_a_dead_kernel_is_reported_and_the_next_call_gets_a_fresh_one(
    idle_executor: CodeExecutor,
) -> None:
    _, agent = make_agent(
        [CodeActionMiddleware(idle_executor)], run_code_then_finish("import os\nos._exit(3)")
    )
    out = await agent.ainvoke(user(), config("died"), version="v2")
    (message,) = tool_messages(out.value)
    assert message.status == "error"
    assert "kernel died" in text_of(message)
    code = "from mcptools.test import add\nprint(add(a=1, b=2))"
    _, agent = make_agent([CodeActionMiddleware(idle_executor)], run_code_then_finish(code))
    only_interrupt(await agent.ainvoke(user(), config("after-death"), version="v2"))
    out = await resume(agent, "after-death", APPROVE)
    assert text_of(tool_messages(out.value)[0]) == "3"
