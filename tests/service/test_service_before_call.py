"""``Execution.before_call`` over ``RemoteSessions``: the service asks the client about each call
of the code before its own policy decides it (an ``ipybox.dev/check`` round), so a check such as
PydanticAI's ``UsageLimits(tool_calls_limit=)`` stops a call the service would let through, as in
process (issue 25). The service here approves every call itself (``--yes``)."""

from __future__ import annotations

import asyncio
import json
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from service_kit import TOKEN, Service, start_app, start_service, wait_for_line

from ipybox_core.approval import ApprovalRequest
from ipybox_core.approval.gate import BEFORE_CALL_DECIDER
from ipybox_core.executor import ExecutionResult, ToolCall
from ipybox_core.remote import RemoteExecutor, RemoteSessions

sys.path.insert(0, str(Path(__file__).parents[1] / "integrations" / "pydantic_ai"))


@pytest.fixture(scope="module")
def audit(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("audit") / "audit.jsonl"


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory, audit: Path) -> Iterator[Service]:
    """An ``ipybox serve --yes``: its policy lets every call through unasked."""
    shared = start_service(tmp_path_factory.mktemp("service") / "ws", "--yes", "--audit-log", str(audit))
    yield shared
    assert shared.stop() == 0


def counts(tags: list[str]) -> str:
    """Code that calls the test server's ``count`` once per tag (a refused call prints ``refused``)."""
    lines = ["from mcptools.test import count", "seen = []"]
    for tag in tags:
        lines += [
            "try:",
            f"    seen.append(count(tag={tag!r}))",
            "except PermissionError as error:",
            "    seen.append(f'refused: {error}')",
        ]
    return "\n".join([*lines, "print(seen)"])


async def server_counts(executor: RemoteExecutor, tags: list[str]) -> list[int]:
    """The test server's counter of each tag, read without any check (each read adds one)."""
    code = f"from mcptools.test import count\nprint([count(tag=t) for t in {tags!r}])"
    return [int(n) for n in (await executor.execute(code)).text.strip().strip("[]").split(",")]


async def checked_run(
    service: Service, conversation: str, code: str, refuse: str | None
) -> tuple[list[str], list[Any], list[int]]:
    """``code`` run with a ``before_call`` that refuses the tool ``refuse`` (``None``: no check):
    the calls it was asked about, the events, and the server's counters of ``a`` and ``b`` after."""
    asked: list[str] = []

    def before_call(request: ApprovalRequest) -> str | None:
        asked.append(request.name)
        return "not this tool" if request.tool == refuse else None

    async with RemoteSessions(service.url, token=TOKEN, client_name="checks") as sessions:
        executor = (await sessions.session(conversation)).executor
        assert isinstance(executor, RemoteExecutor)
        execution = executor.stream(code)
        if refuse is not None:
            execution.before_call = before_call
        events = [event async for event in execution]
        after = await server_counts(executor, [f"{conversation}-a", f"{conversation}-b"])
    return asked, events, after


ADD_THEN_COUNT = (
    "from mcptools.test import add, count\n"
    "print(add(a=1, b=2))\n"
    "try:\n"
    "    count(tag={tag!r})\n"
    "except PermissionError as error:\n"
    "    print('refused:', error)\n"
)


def test_a_before_call_check_refuses_a_call_the_service_would_let_through(
    service: Service, conversation: str, audit: Path
) -> None:
    code = ADD_THEN_COUNT.format(tag=f"{conversation}-a")
    asked, events, after = asyncio.run(checked_run(service, conversation, code, refuse="count"))
    assert asked == ["test.add", "test.count"]  # every call, before the service's policy
    result = events[-1]
    assert isinstance(result, ExecutionResult)
    assert result.text.splitlines() == ["3", "refused: test.count was rejected: not this tool"]
    calls = [event for event in events if isinstance(event, ToolCall)]
    assert [(call.request.name, call.decided_by, call.sent) for call in calls] == [
        ("test.add", "policy:never", True),
        ("test.count", BEFORE_CALL_DECIDER, False),
    ]
    assert after == [1, 1]  # the refused count never reached the MCP server
    records = [json.loads(line) for line in audit.read_text().splitlines()]
    refused = [r for r in records if r.get("request_id") == calls[1].request.id]
    assert [(r["decided_by"], r["approved"], r["reason"]) for r in refused] == [
        (BEFORE_CALL_DECIDER, False, "not this tool")  # recorded as an in-process refusal is
    ]


def test_without_a_check_every_call_runs(service: Service, conversation: str) -> None:
    """The control: the same code, no ``before_call``: nothing is refused."""
    code = ADD_THEN_COUNT.format(tag=f"{conversation}-a")
    asked, events, after = asyncio.run(checked_run(service, conversation, code, refuse=None))
    assert asked == []
    result = events[-1]
    assert isinstance(result, ExecutionResult) and result.text.splitlines() == ["3"]
    assert after == [2, 1]  # the code's count ran, then the read


async def pydantic_run(service: Service, conversation: str, limit: int | None) -> tuple[str, list[int]]:
    """A PydanticAI agent over ``RemoteSessions`` whose code calls ``count`` three times, with
    ``UsageLimits(tool_calls_limit=limit)``: how the run ended, and the server's counters after."""
    from pydantic_ai import UsageLimitExceeded, UsageLimits
    from test_pai_usage import approving_agent

    tags = [f"{conversation}-{n}" for n in range(3)]
    async with RemoteSessions(service.url, token=TOKEN) as sessions:
        agent = approving_agent(sessions, counts(tags))  # type: ignore[arg-type]
        limits = UsageLimits(tool_calls_limit=limit) if limit is not None else None
        try:
            result = await agent.run("go", usage_limits=limits)
        except UsageLimitExceeded as exceeded:
            ended = f"exceeded: {exceeded}"
        else:
            ended = f"done: tool_calls={result.usage.tool_calls}"
        executor = (await sessions.session(conversation)).executor
        assert isinstance(executor, RemoteExecutor)
        return ended, await server_counts(executor, tags)


def test_pydantic_ais_tool_calls_limit_stops_the_call_past_it(service: Service, conversation: str) -> None:
    ended, after = asyncio.run(pydantic_run(service, conversation, limit=2))
    assert ended.startswith("exceeded: ") and "tool_calls_limit of 2" in ended, ended
    assert after == [2, 2, 1]  # the third call of the code never reached the MCP server


def test_pydantic_ai_without_a_limit_runs_every_call(service: Service, conversation: str) -> None:
    """The control: the same agent and code, no limit: all three calls run and count."""
    ended, after = asyncio.run(pydantic_run(service, conversation, limit=None))
    assert ended == "done: tool_calls=3", ended
    assert after == [2, 2, 2]


def hung_check(service: Service, tag: str) -> None:
    """Process A starts code calling ``count(tag=tag)`` with a ``before_call`` that never answers,
    and is SIGKILLed while the service waits for its check."""
    checker = start_app("check_app.py", "hang", service.url, tag)
    assert wait_for_line(checker, "CHECKING") == "CHECKING test.count"
    checker.send_signal(signal.SIGKILL)
    checker.wait()


def audit_record(audit: Path, tag: str, timeout: float = 120.0) -> dict[str, Any]:
    """The audit record of the call of ``count(tag=tag)``, once the service wrote it."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for line in audit.read_text().splitlines() if audit.exists() else []:
            record = json.loads(line)
            if record.get("args", {}).get("tag") == tag and "decided_by" in record:
                return dict(record)
        time.sleep(0.2)
    raise AssertionError(f"no audit record of the call with tag {tag!r}")


async def reattached(
    service: Service, conversation: str, tag: str, refuse: bool
) -> tuple[list[str], str, list[int]]:
    """Process B picks the call up (``reattach``), its ``before_call`` refusing every call if
    ``refuse``: the calls it was asked about, the code's output, the server's counter of ``tag``."""
    asked: list[str] = []

    def before_call(request: ApprovalRequest) -> str | None:
        asked.append(request.name)
        return "worker B says no" if refuse else None

    async with RemoteSessions(service.url, token=TOKEN, client_name="worker-b") as sessions:
        executor = (await sessions.session(conversation)).executor
        assert isinstance(executor, RemoteExecutor)
        again = await executor.reattach("checked")
        assert again is not None
        again.before_call = before_call
        text = (await again.wait()).text
        return asked, text, await server_counts(executor, [tag])


def test_a_check_a_dead_process_left_unanswered_refuses_the_call(
    service: Service, conversation: str, audit: Path
) -> None:
    tag = f"{conversation}-a"
    hung_check(service, tag)
    record = audit_record(audit, tag)  # written when the check's bound passed: the call refused
    assert (record["decided_by"], record["approved"]) == (BEFORE_CALL_DECIDER, False)
    asked, text, after = asyncio.run(reattached(service, conversation, tag, refuse=False))
    assert asked == []  # the execution went on without it: nothing left to check
    assert "refused: test.count was rejected: the application did not answer the before-call check" in text
    assert "(checker-a)" in text
    assert after == [1]  # never run unchecked: only the read reached the server


def test_a_process_that_picks_a_call_up_is_asked_its_pending_check(
    service: Service, conversation: str
) -> None:
    tag = f"{conversation}-a"
    hung_check(service, tag)
    asked, text, after = asyncio.run(reattached(service, conversation, tag, refuse=True))
    assert asked == ["test.count"]  # asked again, of worker B's own check
    assert text.strip() == "refused: test.count was rejected: worker B says no"
    assert after == [1]
