"""What a framework adapter needs from an executor, wherever its kernel runs.

:class:`Executor` is implemented by :class:`~ipybox_core.executor.CodeExecutor` (the kernel is in
this process's care) and :class:`~ipybox_core.remote.RemoteExecutor` (the kernel lives in an
ipybox service); :class:`SessionSource` by ``CodeExecutor`` (one kernel shared by every
conversation), :class:`~ipybox_core.Sessions` and :class:`~ipybox_core.remote.RemoteSessions` (one
kernel per conversation key). An adapter types against these and never asks which one it has.

An execution started with a ``call_id`` belongs to its executor while it waits for a decision:
:meth:`Executor.reattach` finds it again by that id from any adapter instance (in the service: from
any process), and :meth:`Executor.cancel_waiting` cancels it when the conversation moved on; once
it ended unanswered, :meth:`Executor.ended` says why. The backstop for an approval nobody answers
belongs to where the execution lives (``abandon_after`` of a ``CodeExecutor``; the service's
``--approval-timeout``).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from ipybox_core.errors import ExecutionGone
    from ipybox_core.executor.execution import Execution

ToolSummaries = Mapping[str, Mapping[str, str]]
"""MCP tools by server, then tool name: the tool's one-line summary."""


@runtime_checkable
class Executor(Protocol):
    """Runs one conversation's code (see the module docstring)."""

    @property
    def busy(self) -> bool:
        """True while an execution runs or waits for a decision (over a service: while code
        started here runs; what waits there may be answered by any process, so the service decides)."""
        ...

    def stream(self, code: str, *, timeout: float | None = None, call_id: str | None = None) -> Execution:
        """Start ``code``; ``call_id`` names the execution so that :meth:`reattach` finds it.
        Raises :class:`~ipybox_core.errors.ExecutorBusy` while another execution runs or waits
        (over a service, the execution raises it when the service says the session is busy)."""
        ...

    async def reattach(self, call_id: str) -> Execution | None:
        """The execution started under ``call_id`` that still waits, its pending approval handed
        out again as its next event; ``None`` when there is none."""
        ...

    async def ended(self, call_id: str) -> ExecutionGone | None:
        """Why nothing waits under ``call_id`` when :meth:`reattach` found nothing: an
        :class:`~ipybox_core.errors.ExecutionGone` whose ``cause`` and message name it (cancelled
        and why, its approval expired, answered first by whom, the service restarted, ...);
        ``None`` when it is not known. Over a service, what the last :meth:`reattach` of
        ``call_id`` learned."""
        ...

    async def cancel_waiting(
        self,
        *,
        calls: Collection[str] | None = None,
        keep: Collection[str] = (),
        reason: str | None = None,
    ) -> int:
        """Cancel the executions that wait for a decision (those of ``calls`` if given, never those
        of ``keep``); their pending calls are rejected with ``reason``. Returns how many."""
        ...

    def api_reference(self, servers: list[str] | None = None, *, max_chars: int | None = None) -> str:
        """Compact Python signatures of the MCP tools, for an agent's prompt (``""``: none)."""
        ...

    def tool_summaries(self) -> ToolSummaries | None:
        """The MCP tools the code can call, or ``None`` when they are not known in advance (then
        they are learned from the approval requests)."""
        ...

    def tool_description(self, server: str, tool: str) -> str | None:
        """The full description of one MCP tool, when it is known here."""
        ...

    async def reset(self) -> None:
        """Fresh kernel state; the MCP tools are kept."""
        ...

    async def aclose(self) -> None:
        """Release what this executor holds in this process."""
        ...


@runtime_checkable
class Session(Protocol):
    """One conversation's kernel, as a :class:`SessionSource` hands it out."""

    @property
    def key(self) -> str: ...

    @property
    def executor(self) -> Executor: ...

    def take_restart_notice(self) -> str | None:
        """A sentence for the model when this conversation's kernel was restarted (once), else None."""
        ...


@runtime_checkable
class SessionSource(Protocol):
    """Hands out one :class:`Session` per conversation key."""

    @property
    def shares_kernel(self) -> bool:
        """True when every conversation runs in one kernel (a ``CodeExecutor``): conversation keys
        then keep call ids apart, not state; False when each key has a kernel of its own."""
        ...

    async def session(self, key: str) -> Session: ...

    def api_reference(self, servers: list[str] | None = None, *, max_chars: int | None = None) -> str: ...
