"""What an execution streams: output, rich displays, approval requests, MCP servers' questions, tool
calls, the final result."""

from __future__ import annotations

import base64
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

from ipybox_core.approval import ApprovalDecision, ApprovalRequest, CallOutcome
from ipybox_core.errors import CodeError
from ipybox_core.mcp.elicitation import ElicitationRequest


@dataclass(frozen=True)
class OutputChunk:
    """Incremental stdout/stderr text, as the code prints it."""

    text: str
    stream: Literal["stdout", "stderr"] = "stdout"


@dataclass(frozen=True)
class DisplayOutput:
    """A rich output as it appears (a plot, HTML, markdown): a MIME bundle."""

    data: Mapping[str, Any]
    metadata: Mapping[str, Any] = field(default_factory=dict)

    @property
    def png(self) -> bytes | None:
        """The PNG image, decoded, if the bundle has one."""
        value = self.data.get("image/png")
        return base64.b64decode(value) if isinstance(value, str) else None

    @property
    def text(self) -> str:
        """The plain-text representation."""
        value = self.data.get("text/plain", "")
        return value if isinstance(value, str) else str(value)


@dataclass(frozen=True)
class ExecutionResult:
    """The outcome of one execution.

    ``text`` is everything the code printed plus the value of its last expression (head and tail
    kept when longer than the output limit, with a marker saying how much was cut); ``images`` are
    the PNG images it displayed; ``error`` is ``None`` or the exception the code raised, with a
    readable traceback. Timeouts and kernel deaths are raised, not returned.
    """

    text: str
    images: list[bytes] = field(default_factory=list)
    error: CodeError | None = None
    displays: list[DisplayOutput] = field(default_factory=list)
    execution_count: int | None = None
    omitted_chars: int = 0
    """Characters of output cut from the middle of ``text`` to respect the output limit."""

    @property
    def ok(self) -> bool:
        return self.error is None

    def raise_for_error(self) -> ExecutionResult:
        """Raise :class:`CodeError` if the code failed; return self otherwise."""
        if self.error is not None:
            raise self.error
        return self

    def to_text(self) -> str:
        """Text for a language model: the output, then the traceback if the code failed."""
        parts = [self.text.rstrip("\n")] if self.text.strip() else []
        if self.error is not None:
            parts.append(self.error.traceback or f"{self.error.ename}: {self.error.evalue}")
        if not parts:
            parts.append("(no output)" if not self.images else f"({len(self.images)} image(s))")
        return "\n".join(parts)


@dataclass(frozen=True)
class ToolCall:
    """A tool call the code made (an MCP tool, or a host tool of server ``agent_tools``), once it is
    over: how it was decided and what it came to.

    Streamed for every decided call, also those the approval policy let through (or refused)
    without asking; a call the application was asked about was an :class:`ApprovalRequest` event
    first (``request`` is that object). Shell commands are not tool calls. Over ``RemoteSessions``
    (an ipybox service) they come relayed with the output.
    """

    request: ApprovalRequest
    decision: ApprovalDecision
    outcome: CallOutcome

    @property
    def server(self) -> str:
        return self.request.server

    @property
    def tool(self) -> str:
        return self.request.tool

    @property
    def name(self) -> str:
        """``server.tool``."""
        return self.request.name

    @property
    def arguments(self) -> dict[str, Any]:
        """The arguments as sent (the approver's edit, if any), else as the code passed them."""
        edited = self.decision.arguments
        return dict(edited) if edited is not None else self.request.args

    @property
    def decided_by(self) -> str:
        """``policy:<rule>``, ``user``, ``client:<name>``, ``timeout``, ... (as in the audit log)."""
        return self.decision.decided_by

    @property
    def sent(self) -> bool:
        """True when the call was let through to its tool (its result, or error, is ``outcome``)."""
        return self.decision.approved

    @property
    def by_policy(self) -> bool:
        """True when the approval policy decided the call without asking anyone."""
        return self.decided_by.startswith("policy:")


ExecutionEvent: TypeAlias = (
    OutputChunk | DisplayOutput | ApprovalRequest | ElicitationRequest | ToolCall | ExecutionResult
)
"""Everything :meth:`CodeExecutor.stream` yields; the last event is always an :class:`ExecutionResult`.

An :class:`~ipybox_core.mcp.elicitation.ElicitationRequest` is an MCP server's question during a call
of the code (a ``CodeExecutor`` without ``mcp_elicit``): answer it before asking for the next event,
or it is declined."""
