"""Approving the code's MCP calls through the MCP client: elicitation, in both protocol eras.

Each MCP call made by code in ``execute_code`` becomes one elicitation naming the server, the
tool and the arguments. Accept runs the call; decline or cancel raises ``PermissionError`` in the
code. How the question travels depends on the protocol version the client negotiated:

- up to 2025-11-25 (the ``initialize`` handshake, what Claude Code, Claude Desktop, Cursor and
  ``Client(mode="legacy")`` speak): the server sends an ``elicitation/create`` request in the
  middle of the ``tools/call`` and waits for the answer (:meth:`Approver.ask_inline`);
- from 2026-07-28 (``Client(mode="auto")``, the 2.x SDK's default): servers cannot send requests
  to the client (``NoBackChannelError``). Instead the ``tools/call`` returns an
  ``InputRequiredResult`` carrying the elicitation; the execution stays parked while the client
  asks the user and retries the call with the answer (``_suspended.SuspendedExecutions``).
  The official client does this by itself when it has an ``elicitation_callback``.

Without elicitation support in the client, calls are rejected with a message that says how to
auto-approve; with ``auto_approve`` every call is accepted without asking.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from dataclasses import dataclass
from typing import Any, Literal

from mcp.server.mcpserver import Context
from mcp_types import ElicitRequest, ElicitRequestFormParams, ElicitResult
from mcp_types.version import is_version_at_least
from pydantic import BaseModel

from ipybox_core.approval import ApprovalDecision, ApprovalRequest
from ipybox_core.approval.gate import NO_LISTENER
from ipybox_core.approval.request import USER

INPUT_REQUIRED_VERSION = "2026-07-28"
"""First protocol version whose tool calls carry elicitations in an ``InputRequiredResult``."""

NO_ELICITATION_MESSAGE = (
    "this MCP call needs the user's approval, but the MCP client cannot ask the user (it does not "
    "support elicitation). Start the server with `ipybox mcp --yes` to approve MCP calls "
    "automatically, or use a client that supports elicitation."
)

Channel = Literal["auto", "inline", "input_required", "unavailable"]


class _Confirm(BaseModel):
    """Nothing to fill in: accept or decline is the answer."""


@dataclass(frozen=True)
class Approver:
    """Decides the approval requests of executions run for one MCP client request."""

    auto_approve: bool = False

    def channel(self, ctx: Context[Any, Any]) -> Channel:
        """How requests of the current tool call are decided."""
        if self.auto_approve:
            return "auto"
        if not _supports_form_elicitation(ctx):
            return "unavailable"
        version = ctx.protocol_version
        if version is not None and is_version_at_least(version, INPUT_REQUIRED_VERSION):
            return "input_required"
        return "inline"

    async def decide_now(self, request: ApprovalRequest, ctx: Context[Any, Any], channel: Channel) -> None:
        """Decide ``request`` within the current tool call (every channel but ``input_required``)."""
        if channel == "auto":
            await request.accept()
        elif channel == "unavailable":
            await request.reject(NO_ELICITATION_MESSAGE, decided_by=NO_LISTENER)
        else:
            await self.ask_inline(request, ctx)

    async def ask_inline(self, request: ApprovalRequest, ctx: Context[Any, Any]) -> None:
        """Send an ``elicitation/create`` request and apply the user's answer.

        Stops waiting when the request is decided meanwhile (the approval timed out, or ``reset``).
        """
        decided = asyncio.Event()
        request.add_done_callback(lambda _: decided.set())
        asking = asyncio.ensure_future(ctx.elicit(approval_message(request), _Confirm))
        waiting = asyncio.ensure_future(decided.wait())
        try:
            await asyncio.wait({asking, waiting}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (asking, waiting):
                if not task.done():
                    task.cancel()
        if not asking.done() or asking.cancelled():
            return  # decided without the user
        try:
            answer = asking.result()
        except Exception as exc:  # the client failed to answer: never run the call unapproved
            if request.pending:
                await request.reject(f"the approval request failed: {exc}", decided_by=NO_LISTENER)
            return
        await apply_answer(request, Answer(answer.action))

    def input_request(self, request: ApprovalRequest) -> ElicitRequest:
        """The elicitation for ``request``, to embed in an ``InputRequiredResult``."""
        return ElicitRequest(
            params=ElicitRequestFormParams(message=approval_message(request), requested_schema=CONFIRM_SCHEMA)
        )


CONFIRM_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}}
"""An empty form: the user only accepts or declines."""


@dataclass(frozen=True)
class Answer:
    """A client's answer to one approval: the elicitation ``action`` plus what ipybox's own client
    may add in ``content`` (see :mod:`.protocol`)."""

    action: str | None
    reason: str | None = None
    arguments: dict[str, Any] | None = None
    cancel: bool = False
    outcome: str | None = None
    """An agent tool's outcome (JSON text), in the answer to a call handed to the client."""


def answer_of(response: object) -> Answer:
    """The :class:`Answer` in an input response (an :class:`ElicitResult` or its dict form)."""
    if isinstance(response, ElicitResult):
        action: object = response.action
        content: object = response.content
    elif isinstance(response, dict):
        action, content = response.get("action"), response.get("content")
    else:
        return Answer(None)
    fields = content if isinstance(content, dict) else {}
    reason, arguments = fields.get("reason"), _edited_arguments(fields.get("arguments"))
    return Answer(
        action if isinstance(action, str) else None,
        reason=reason if isinstance(reason, str) and reason else None,
        arguments=arguments,
        cancel=fields.get("cancel") is True,
        outcome=outcome if action == "accept" and isinstance(outcome := fields.get("outcome"), str) else None,
    )


def _edited_arguments(value: object) -> dict[str, Any] | None:
    """Edited arguments: a JSON object in a string (an elicitation form's values are strings, so
    ipybox's own client sends them so), or an object from a client that sends one anyway."""
    if isinstance(value, str):
        with contextlib.suppress(ValueError):
            value = json.loads(value)
    return value if isinstance(value, dict) else None


async def apply_answer(request: ApprovalRequest, answer: Answer, *, decided_by: str = USER) -> None:
    """Accept on ``"accept"``; reject on anything else (decline, cancel, no answer)."""
    if not request.pending:
        return  # decided meanwhile (e.g. the approval timed out)
    if answer.action == "accept":
        decision = ApprovalDecision(approved=True, decided_by=decided_by, arguments=answer.arguments)
    else:
        reason = answer.reason or _REJECTIONS.get(
            answer.action or "", "the MCP client returned no answer to the approval request"
        )
        decision = ApprovalDecision(approved=False, decided_by=decided_by, reason=reason)
    request.resolve(decision)


_REJECTIONS = {
    "decline": "the user declined the MCP call",
    "cancel": "the user dismissed the approval request",
}


_INDENT_UP_TO = 4096
"""Characters of arguments (as compact JSON) shown indented in the question; larger ones stay compact
(indentation grows with the nesting depth: 600 KiB of JSON 390 levels deep indents to 150 MiB)."""


def approval_message(request: ApprovalRequest) -> str:
    """The question shown to the user: server, tool, arguments and the tool's hints."""
    if request.kind == "shell":
        return f"ipybox: the code wants to run a shell command:\n\n{request.args.get('command', '')}"
    hint = f" ({', '.join(request.hints)})" if request.hints else ""
    arguments = json.dumps(request.args, ensure_ascii=False, default=str)
    if len(arguments) <= _INDENT_UP_TO:  # indenting deep JSON multiplies it: only small arguments
        arguments = json.dumps(request.args, indent=2, ensure_ascii=False, default=str)
    return (
        f"ipybox: approve this MCP tool call{hint}?\n\n"
        f"server: {request.server}\ntool: {request.tool}\narguments: {arguments}"
    )


def _supports_form_elicitation(ctx: Context[Any, Any]) -> bool:
    capabilities = ctx.client_capabilities
    elicitation = capabilities.elicitation if capabilities is not None else None
    if elicitation is None:
        return False
    # An empty capability object (2025-06-18 clients) means form mode.
    return elicitation.form is not None or elicitation.url is None
