"""Every tool call of the code is a ``ToolCall`` event, also one the approval policy lets through
without asking; ``Execution.before_call`` refuses a call before it is decided or sent."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from executor_kit import STDIO_SERVER

from ipybox_core import (
    ApprovalRequest,
    ApprovalRules,
    CodeExecutor,
    ExecutionResult,
    HostCall,
    HostTool,
    ToolCall,
)

pytestmark = pytest.mark.asyncio(loop_scope="module")


async def double(call: HostCall) -> int:
    return 2 * int(call.arguments["x"])


DOUBLE = HostTool(
    "double",
    double,
    "Twice x.",
    {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]},
    {"type": "integer"},
)


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def executor(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[CodeExecutor]:
    rules = ApprovalRules(allow=["test.count", "agent_tools.*"], deny=["test.echo"])
    async with CodeExecutor(workspace=tmp_path_factory.mktemp("ws"), approval=rules, timeout=120) as ex:
        await ex.register_mcp_server("test", STDIO_SERVER)
        await ex.register_host_tools([DOUBLE])
        yield ex


async def _events(executor: CodeExecutor, code: str) -> tuple[list[ToolCall], list[str], ExecutionResult]:
    calls: list[ToolCall] = []
    asked: list[str] = []
    result = None
    async with executor.stream(code) as execution:
        async for event in execution:
            if isinstance(event, ToolCall):
                calls.append(event)
            elif isinstance(event, ApprovalRequest):
                asked.append(event.name)
                await event.accept()
            elif isinstance(event, ExecutionResult):
                result = event
    assert result is not None
    return calls, asked, result


async def _count(executor: CodeExecutor, tag: str) -> int:
    text = (await executor.execute(f"from mcptools.test import count\nprint(count(tag={tag!r}))")).text
    return int(text.split()[-1])


async def test_each_call_is_an_event_with_its_decision_and_result(executor: CodeExecutor) -> None:
    code = (
        "from mcptools.test import count, echo, add\n"
        "from agent_tools import double\n"
        "first = count(tag='events')\n"
        "try:\n"
        "    echo(message='no')\n"
        "except PermissionError:\n"
        "    pass\n"
        "print(first, add(a=1, b=2), double(x=4))"
    )
    calls, asked, result = await _events(executor, code)
    assert result.error is None, result.to_text()
    assert asked == ["test.add"]  # only the call the rules leave to a decision was asked
    seen = [(call.name, call.arguments, call.decided_by, call.sent, call.by_policy) for call in calls]
    assert seen == [
        ("test.count", {"tag": "events"}, "policy:allow test.count", True, True),
        ("test.echo", {"message": "no"}, "policy:deny test.echo", False, True),
        ("test.add", {"a": 1, "b": 2}, "user", True, False),
        ("agent_tools.double", {"x": 4}, "policy:allow agent_tools.*", True, True),
    ]
    count, echo, add, host = (call.outcome for call in calls)
    assert count.ok and int(count.text) == int(result.text.split()[0])
    assert not echo.ok and echo.error == "rejected"
    assert add.ok and add.structured is not None
    assert host.ok and "8" in host.text


async def test_before_call_refuses_an_allowed_call_before_it_is_sent(executor: CodeExecutor) -> None:
    before = await _count(executor, "refused")
    refused: list[ToolCall] = []
    code = (
        "from mcptools.test import count\n"
        "count(tag='refused')\n"
        "try:\n"
        "    count(tag='refused')\n"
        "except PermissionError as e:\n"
        "    print('refused:', e)"
    )
    seen = 0

    def one_call_only(request: ApprovalRequest) -> str | None:
        nonlocal seen
        seen += 1
        return "one call only" if seen > 1 else None

    async with executor.stream(code) as execution:
        execution.before_call = one_call_only
        async for event in execution:
            if isinstance(event, ToolCall):
                refused.append(event)
            elif isinstance(event, ExecutionResult):
                assert "refused: test.count was rejected: one call only" in event.text, event.to_text()
    assert [(call.sent, call.decided_by) for call in refused] == [
        (True, "policy:allow test.count"),
        (False, "before-call"),
    ]
    assert await _count(executor, "refused") == before + 2  # the refused call never reached the server
