"""Each decided call of the code reaches a ``RemoteSessions`` client as a ``ToolCall`` event, with
what it came to, as from an in-process executor (issue 25): events, ``outcome()``, the tool's input
schema, and PydanticAI's usage over a real ``ipybox serve``."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

from service_kit import TOKEN, Service, start_service

from ipybox_core.approval import ApprovalRequest, ApprovalRules, CallOutcome
from ipybox_core.executor import ExecutionResult, ToolCall
from ipybox_core.remote import RemoteSessions

TWO_ADDS = "from mcptools.test import add\nprint(add(a=1, b=2), add(a=20, b=22))"


async def events_of(
    service: Service, conversation: str, code: str, rules: ApprovalRules | None = None
) -> tuple[list[Any], list[CallOutcome | None]]:
    """The events of ``code`` run through the service (every asked call accepted), and each asked
    request's ``outcome()``."""
    seen: list[Any] = []
    outcomes: list[CallOutcome | None] = []
    async with RemoteSessions(
        service.url, token=TOKEN, client_name="calls", approval_rules=rules
    ) as sessions:
        executor = (await sessions.session(conversation)).executor
        async for event in executor.stream(code):
            seen.append(event)
            if isinstance(event, ApprovalRequest):
                await event.accept()
                outcomes.append(await event.outcome())
    return seen, outcomes


def test_an_asked_call_is_a_tool_call_event_with_its_outcome(service: Service, conversation: str) -> None:
    seen, outcomes = asyncio.run(events_of(service, conversation, TWO_ADDS))
    asked = [event for event in seen if isinstance(event, ApprovalRequest)]
    calls = [event for event in seen if isinstance(event, ToolCall)]
    assert [call.arguments for call in calls] == [{"a": 1, "b": 2}, {"a": 20, "b": 22}]
    assert [call.request for call in calls] == asked  # the requests the client was asked about
    assert all(call.sent and call.decided_by == "client:calls" for call in calls)
    assert [outcome.text if outcome else None for outcome in outcomes] == ["3", "42"]
    assert all(outcome is not None and outcome.ok for outcome in outcomes)
    properties = (asked[0].input_schema or {}).get("properties", {})
    assert set(properties) == {"a", "b"}  # the tool's schema: an edit is checked here too
    assert isinstance(seen[-1], ExecutionResult) and seen[-1].text.strip() == "3 42"


def test_a_call_the_rules_decide_is_a_tool_call_event_too(service: Service, conversation: str) -> None:
    rules = ApprovalRules(deny=["test.add"], default="allow")  # narrows the service's: asked -> denied
    seen, _ = asyncio.run(
        events_of(service, conversation, "from mcptools.test import add\nadd(a=1, b=2)", rules)
    )
    (call,) = [event for event in seen if isinstance(event, ToolCall)]
    assert not any(isinstance(event, ApprovalRequest) for event in seen)
    assert not call.sent and call.decided_by.startswith("policy:") and call.outcome.error == "rejected"


def test_pydantic_ai_counts_the_calls_the_service_lets_through_as_in_process(tmp_path: Path) -> None:
    """The service approves every call itself (``--yes``): no call reaches the adapter as a
    question, yet the run's usage counts both, as in process and as for a native agent."""
    sys.path.insert(0, str(Path(__file__).parents[1] / "integrations" / "pydantic_ai"))
    from test_pai_usage import TWO_CALLS, approving_agent

    service = start_service(tmp_path / "ws", "--yes")

    async def main() -> int:
        async with RemoteSessions(service.url, token=TOKEN) as sessions:
            agent = approving_agent(sessions, TWO_CALLS)  # type: ignore[arg-type]
            result = await agent.run("go")
            assert str(result.output).startswith("done: "), result.output
            return result.usage.tool_calls

    try:
        assert asyncio.run(main()) == 2  # the two MCP calls; execute_code itself is none
    finally:
        assert service.stop() == 0
