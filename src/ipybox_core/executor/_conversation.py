"""One executor's kernel shared by every conversation: each conversation sees its own call ids."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ipybox_core.executor.contract import ToolSummaries

if TYPE_CHECKING:
    from ipybox_core.errors import ExecutionGone
    from ipybox_core.executor.execution import Execution
    from ipybox_core.executor.executor import CodeExecutor

_SEPARATOR = "\x00"


class ConversationExecutor:
    """A :class:`CodeExecutor` as one conversation uses it: the conversation's call ids are its own
    (two conversations may use the same framework call id), and :meth:`cancel_waiting` without
    ``calls`` cancels only this conversation's waiting execution."""

    def __init__(self, executor: CodeExecutor, conversation: str) -> None:
        self.shared = executor
        self.conversation = conversation
        self._prefix = conversation + _SEPARATOR

    @property
    def busy(self) -> bool:
        return self.shared.busy

    def stream(self, code: str, *, timeout: float | None = None, call_id: str | None = None) -> Execution:
        return self.shared.stream(code, timeout=timeout, call_id=self._scoped(call_id))

    async def reattach(self, call_id: str) -> Execution | None:
        return await self.shared.reattach(self._prefix + call_id)

    async def ended(self, call_id: str) -> ExecutionGone | None:
        return await self.shared.ended(self._prefix + call_id)

    async def cancel_waiting(
        self,
        *,
        calls: Collection[str] | None = None,
        keep: Collection[str] = (),
        reason: str | None = None,
    ) -> int:
        return await self.shared.cancel_waiting(
            calls=None if calls is None else [self._prefix + call for call in calls],
            keep=[self._prefix + call for call in keep],
            reason=reason,
            scope=self._prefix,
        )

    def api_reference(self, servers: list[str] | None = None, *, max_chars: int | None = None) -> str:
        return self.shared.api_reference(servers, max_chars=max_chars)

    def tool_summaries(self) -> ToolSummaries | None:
        return self.shared.tool_summaries()

    def tool_description(self, server: str, tool: str) -> str | None:
        return self.shared.tool_description(server, tool)

    def bind_tool_context(self, context: object) -> None:
        self.shared.bind_tool_context(context)

    async def reset(self) -> None:
        await self.shared.reset()

    async def aclose(self) -> None:
        """Nothing: the shared executor is closed by whoever started it."""

    def _scoped(self, call_id: str | None) -> str | None:
        return None if call_id is None else self._prefix + call_id


@dataclass(frozen=True)
class SharedSession:
    """A conversation of an executor whose kernel every conversation shares (no restart notices)."""

    key: str
    executor: ConversationExecutor

    def take_restart_notice(self) -> str | None:
        return None
