"""One held call and the application's answer to it."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from ipybox_core.errors import ApprovalError
from ipybox_core.mcp.types import ToolAnnotations

ApprovalKind = Literal["mcp", "shell"]

USER = "user"
"""``decided_by`` of an answer from the application with no name of its own (a person, as far as
ipybox knows); ipybox's service names its clients instead: ``client:<name>``."""
TIMEOUT = "timeout"
"""``decided_by`` of a request nobody answered in time (the approval timeout, or a parked execution
abandoned by its timer)."""
SHUTDOWN = "shutdown"
"""``decided_by`` of a request still waiting when the service (or its executor) shut down."""
CONVERSATION_MOVED_ON = "moved-on"
"""``decided_by`` of a request dropped because its conversation went on without it (a new turn,
``cancel_waiting``, a reset, the end of the session)."""


@dataclass(frozen=True)
class ApprovalDecision:
    """How a request was decided, and by whom (``"user"``, ``"policy:deny shop.*"``, ...)."""

    approved: bool
    decided_by: str
    reason: str | None = None
    arguments: dict[str, Any] | None = None
    """Replacement arguments when the approver edited the call (``None``: unchanged)."""


@dataclass(frozen=True)
class CallOutcome:
    """What a decided call came to: the tool's result, or why it gave none."""

    ok: bool
    """True when the call ran and the tool returned a result."""
    structured: Any = None
    """The result's structured content (``None`` when the tool sent none)."""
    text: str = ""
    """The result's text, or the error message when ``ok`` is false."""
    error: str | None = None
    """``None`` on success, else what the code saw: ``"rejected"``, ``"tool_error"``, ``"timeout"``, ..."""


@dataclass(frozen=True)
class JsonArguments:
    """A call's arguments kept as the JSON request body they arrived in (the object in its ``member``).

    Held instead of the parsed arguments while a call waits: its bytes, bounded by the tool
    server's request limit, not a parsed tree (which costs up to ~30 times as much). The body was
    checked when it arrived: :meth:`parse` gives the same JSON object each time.
    """

    body: bytes = field(repr=False)
    member: str = "arguments"

    @property
    def size(self) -> int:
        """Bytes of the body."""
        return len(self.body)

    def parse(self) -> dict[str, Any]:
        """A fresh dict of the arguments (a missing or ``null`` member is ``{}``)."""
        arguments = json.loads(self.body).get(self.member) or {}
        if not isinstance(arguments, dict):  # pragma: no cover - refused when the body arrived
            raise ValueError(f"{self.member} is not a JSON object")
        return arguments


_REPR_ARGS_UP_TO = 4096  # bytes of JSON arguments that repr() still parses and shows


class ApprovalRequest:
    """A call from kernel code that waits for the application's decision.

    For ``kind == "mcp"`` it names the MCP ``server`` and ``tool`` with the call's ``args``; for
    ``kind == "shell"`` the server is ``""``, the tool is ``"shell"`` and ``args`` is
    ``{"command": <expanded command line>}``. Answer with :meth:`accept` or :meth:`reject`; a
    rejection raises ``PermissionError(reason)`` in the code.
    """

    def __init__(
        self,
        *,
        kind: ApprovalKind,
        server: str,
        tool: str,
        args: dict[str, Any] | JsonArguments,
        annotations: ToolAnnotations | None = None,
        output_mark: str | None = None,
        input_schema: dict[str, Any] | None = None,
    ) -> None:
        self.id: str = uuid.uuid4().hex
        self.kind: ApprovalKind = kind
        self.server = server
        self.tool = tool
        self._args = args
        self.annotations = annotations or ToolAnnotations()
        self.input_schema = input_schema
        """The tool's JSON Schema for its arguments (to check an edit before sending it); ``None``
        for shell commands."""
        self.output_mark = output_mark
        """The output mark the kernel published before this request (the executor hands the
        request out once the output up to it was handed out); None if the kernel sent none."""
        self.created_at = time.time()
        self._future: asyncio.Future[ApprovalDecision] = asyncio.get_running_loop().create_future()
        self._outcome: asyncio.Future[CallOutcome | None] | None = None

    @property
    def args(self) -> dict[str, Any]:
        """The call's arguments.

        Arguments from the kernel's tool server are kept as their JSON text while the request
        waits (a pending request costs its bytes, not a parsed tree) and parsed on each read: every
        read gives a fresh dict, so changing it changes nothing; edit the call with
        ``accept(arguments=...)``.
        """
        args = self._args
        return args.parse() if isinstance(args, JsonArguments) else args

    @property
    def name(self) -> str:
        """``server.tool`` for MCP calls, ``shell`` for shell commands."""
        return f"{self.server}.{self.tool}" if self.kind == "mcp" else "shell"

    @property
    def hints(self) -> list[str]:
        """The tool's annotations worth showing an approver: ``"read-only"``, ``"destructive"``."""
        flags = (
            ("read-only", self.annotations.read_only_hint),
            ("destructive", self.annotations.destructive_hint),
        )
        return [name for name, flag in flags if flag]

    @property
    def pending(self) -> bool:
        """True until the request is decided, expires or is abandoned by the code."""
        return not self._future.done()

    @property
    def decision(self) -> ApprovalDecision | None:
        """The decision, once made."""
        if self._future.done() and not self._future.cancelled():
            return self._future.result()
        return None

    async def accept(self, *, arguments: dict[str, Any] | None = None, decided_by: str = USER) -> None:
        """Let the call through, optionally with edited ``arguments``; ``decided_by`` goes to the
        audit log."""
        self.resolve(ApprovalDecision(approved=True, decided_by=decided_by, arguments=arguments))

    async def reject(self, reason: str = "rejected by the application", *, decided_by: str = USER) -> None:
        """Refuse the call; the code sees ``PermissionError`` carrying ``reason``; ``decided_by``
        goes to the audit log."""
        self.resolve(ApprovalDecision(approved=False, decided_by=decided_by, reason=reason))

    def resolve(self, decision: ApprovalDecision) -> None:
        """Decide the request (synchronous form of :meth:`accept`/:meth:`reject`)."""
        if self._future.cancelled():
            raise ApprovalError(f"approval request {self.id} ({self.name}) was abandoned by the code")
        if self._future.done():
            previous = self._future.result()
            raise ApprovalError(
                f"approval request {self.id} ({self.name}) was already decided by {previous.decided_by}"
            )
        self._future.set_result(decision)

    def expect_outcome(self) -> None:
        """Called by whoever will run the call (the kernel's tool server): :meth:`outcome` then
        waits for what it reports with :meth:`finish`."""
        if self._outcome is None:
            self._outcome = asyncio.get_running_loop().create_future()

    def finish(self, outcome: CallOutcome | None) -> None:
        """Report what the call came to (once; later reports are ignored); ``None``: it will not be
        known (:meth:`outcome` then returns ``None``)."""
        if self._outcome is not None and not self._outcome.done():
            self._outcome.set_result(outcome)

    async def outcome(self) -> CallOutcome | None:
        """What the call came to once it ran (or was refused): the tool's result, for traces and
        events. ``None`` where nobody reports it (over ``RemoteSessions``: the execution went on
        without this client)."""
        if self._outcome is None:
            return None
        return await asyncio.shield(self._outcome)

    def add_done_callback(self, callback: Callable[[ApprovalRequest], None]) -> None:
        """Call ``callback(self)`` once the request is decided, expired or abandoned."""
        self._future.add_done_callback(lambda _: callback(self))

    async def wait(self, timeout: float | None = None) -> ApprovalDecision:
        """Wait for the decision; after ``timeout`` seconds the request is rejected as expired.

        The decision wakes the waiter directly (one event-loop step: no shield, no ``wait_for``);
        cancelling the waiter abandons the request.
        """
        expiry = None
        if timeout is not None:
            expiry = asyncio.get_running_loop().call_later(timeout, self._expire, timeout)
        try:
            return await self._future  # a cancelled waiter cancels the future: abandoned
        finally:
            if expiry is not None:
                expiry.cancel()

    def _expire(self, timeout: float) -> None:
        if not self._future.done():
            self._future.set_result(
                ApprovalDecision(
                    approved=False,
                    decided_by=TIMEOUT,
                    reason=f"approval timed out after {timeout:g} s without a decision",
                )
            )

    def __repr__(self) -> str:
        state = "pending" if self.pending else ("abandoned" if self._future.cancelled() else "decided")
        args = self._args
        shown = (
            f"<{args.size} bytes of JSON>"
            if isinstance(args, JsonArguments) and args.size > _REPR_ARGS_UP_TO
            else repr(self.args)
        )
        return f"ApprovalRequest(id={self.id!r}, name={self.name!r}, args={shown}, {state})"


@dataclass(frozen=True)
class ApprovalRecord:
    """One line of the audit log."""

    time: float
    request_id: str
    kind: ApprovalKind
    server: str
    tool: str
    args: dict[str, Any]
    approved: bool
    decided_by: str
    reason: str | None = None
    edited_args: dict[str, Any] | None = field(default=None)
