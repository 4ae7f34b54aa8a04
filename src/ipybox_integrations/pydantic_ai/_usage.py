"""Usage as PydanticAI counts a native agent's: each tool call the code makes is a tool call of the
run, ``execute_code`` itself is none, and ``UsageLimits(tool_calls_limit=)`` stops the call that
would pass the limit before it is sent.

A native agent that makes the same calls through PydanticAI's own tools counts each call that runs
(a denied one is not run, so not counted) and checks the limit before the calls run. Here a call
the run decides (a held MCP call, any call of the agent's own tools) runs through a one-tool
``ToolManager``, which counts it as PydanticAI counts any tool; an MCP call the executor's approval
policy lets through unasked never reaches the run, so it is counted from its
:class:`~ipybox_core.executor.ToolCall` event. The limit is checked in the executor's gate
(``Execution.before_call``), before the policy or anyone decides the call, counting the calls that
were let on and are not counted yet.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from pydantic_ai import RunContext, UsageLimitExceeded

from ipybox_core.approval import ApprovalRequest
from ipybox_core.approval.gate import BEFORE_CALL_DECIDER
from ipybox_core.executor import ToolCall


class CodeCalls:
    """The tool calls of one ``execute_code`` call's code, counted and limited in ``ctx``'s run."""

    def __init__(self, ctx: RunContext[Any], runs_in_the_run: Callable[[ToolCall], bool]) -> None:
        self.ctx = ctx
        self._runs_in_the_run = runs_in_the_run  # the agent's own tools: a ToolManager counts them
        self._uncounted: set[str] = set()  # let on, not counted yet (ids of their requests)
        self._exceeded: UsageLimitExceeded | None = None

    def admit(self, request: ApprovalRequest) -> None:
        """Raise ``UsageLimitExceeded`` when ``request``'s call would pass the run's tool_calls_limit."""
        limits = self.ctx.usage_limits
        if limits is None or limits.tool_calls_limit is None or request.kind != "mcp":
            return
        usage = self.ctx.usage
        projected = usage.tool_calls + len(self._uncounted - {request.id}) + 1
        limits.check_before_tool_call(dataclasses.replace(usage, tool_calls=projected))
        self._uncounted.add(request.id)

    def before_call(self, request: ApprovalRequest) -> str | None:
        """``Execution.before_call``: refuse a call past the limit (the run ends at its event)."""
        try:
            self.admit(request)
        except UsageLimitExceeded as exceeded:
            self._exceeded = exceeded
            return str(exceeded)
        return None

    def counted(self, request: ApprovalRequest) -> None:
        """``request``'s call is counted (or will never be)."""
        self._uncounted.discard(request.id)

    @contextmanager
    def deciding(self, request: ApprovalRequest) -> Iterator[None]:
        """Around the run's decision of a held call: the limit is checked first; the call is
        counted after (by the one-tool ``ToolManager`` it ran in, as PydanticAI counts any tool)."""
        self.admit(request)
        try:
            yield
        finally:
            self.counted(request)

    def finished(self, call: ToolCall) -> None:
        """Count a call the policy let through; end the run at a call the limit refused."""
        self.counted(call.request)
        if call.sent and call.by_policy and not self._runs_in_the_run(call):
            self.ctx.usage.tool_calls += 1
        elif call.decided_by == BEFORE_CALL_DECIDER and self._exceeded is not None:
            raise self._exceeded


def not_a_tool_call(ctx: RunContext[Any]) -> None:
    """Called as ``execute_code`` returns: PydanticAI counts it as a tool call then, but only the
    calls its code made count (a native agent making them has no ``execute_code``)."""
    ctx.usage.tool_calls -= 1
