"""Questions an upstream MCP tool asks its user (``elicitation/create``), routed to the application.

An MCP server may ask, in the middle of a tool call, for a small form to be filled in (form mode:
a flat JSON schema of strings, numbers, booleans and enums, with defaults), or for the user to open
a URL for something that must not pass through the client (URL mode). ipybox hands the
application an :class:`ElicitationRequest` through its ``elicit`` callback
(``McpRegistry(elicit=...)``, ``CodeExecutor(mcp_elicit=...)``), which answers with an
:class:`ElicitationAnswer`: accept with content, decline or cancel. Accepted content is completed
with the schema's defaults and validated against the schema before it is sent back; content that
does not match is refused with one line naming the problem.

A ``CodeExecutor`` without ``mcp_elicit`` makes a question that arrives during an execution an
event of that execution instead: the :class:`ElicitationRequest` is answered with its own
:meth:`~ElicitationRequest.accept`, :meth:`~ElicitationRequest.decline` or
:meth:`~ElicitationRequest.cancel`; in ``Sessions``, an event of the execution of the conversation
whose call asked. Elsewhere, without a callback, every question is declined,
and the code that called the tool is told why on its stderr. Time spent answering does not count
against the call's ``call_timeout``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from ipybox_core.errors import IpyboxError

__all__ = [
    "Elicit",
    "ElicitationAnswer",
    "ElicitationContentError",
    "ElicitationError",
    "ElicitationRequest",
    "complete_content",
]


@dataclass(frozen=True)
class ElicitationRequest:
    """An MCP server asks the application's user to fill in a form during a tool call.

    Given to an ``elicit`` callback, it is answered by the callback's return value. Streamed as an
    event of an execution (a ``CodeExecutor`` without ``mcp_elicit``), it is answered with
    :meth:`accept`, :meth:`decline` or :meth:`cancel`; the call waits meanwhile, its timeouts paused.
    A question left unanswered when its execution ends, is cancelled, or when its consumer asks for
    the next event, is declined on the user's behalf.
    """

    server: str
    """The server's name in the registry (its key in ``mcpServers``)."""
    tool: str | None
    """The tool whose call asked (``None`` when several calls of the server were running)."""
    message: str
    """What the server says to the user."""
    schema: Mapping[str, Any]
    """The requested JSON schema (an object of primitive properties); empty in URL mode."""
    url: str | None = None
    """URL mode: the page the user is asked to open (the answer says only whether they agreed;
    nothing the user enters there passes through ipybox). ``None``: a form."""
    conversation: str | None = None
    """The conversation whose call asked (``Sessions``): show the question to that user only.
    ``None``: outside ``Sessions``."""
    _reply: asyncio.Future[ElicitationAnswer] | None = field(
        default=None, init=False, repr=False, compare=False
    )

    @property
    def defaults(self) -> dict[str, Any]:
        """The schema's default value of each property that has one."""
        properties: Mapping[str, Any] = self.schema.get("properties") or {}
        return {
            name: spec["default"]
            for name, spec in properties.items()
            if isinstance(spec, Mapping) and "default" in spec
        }

    # --- answering a streamed question --------------------------------------------------------

    @property
    def pending(self) -> bool:
        """True while a streamed question waits for its answer."""
        reply = self._reply
        return reply is not None and not reply.done()

    @property
    def answer(self) -> ElicitationAnswer | None:
        """The answer given to a streamed question, once given (``None`` before, or when the server
        withdrew the question)."""
        reply = self._reply
        if reply is None or not reply.done() or reply.cancelled():
            return None
        return reply.result()

    def respond(self, answer: ElicitationAnswer) -> None:
        """Answer a streamed question (the synchronous form of :meth:`accept`, :meth:`decline`,
        :meth:`cancel`).

        Raises:
            ElicitationContentError: accepted content breaks the requested schema (the question
                stays open: answer again).
            ElicitationError: the question is not streamed (an ``elicit`` callback answers it), was
                answered already, or was withdrawn by its server.
        """
        reply = self._reply
        if reply is None:
            raise ElicitationError(
                f"the question of MCP server {self.server!r} is answered by the elicit callback's "
                "return value"
            )
        if reply.cancelled():
            raise ElicitationError(f"MCP server {self.server!r} withdrew the question (its call ended)")
        if reply.done():
            raise ElicitationError(
                f"the question of MCP server {self.server!r} was answered already ({reply.result().action})"
            )
        if answer.action == "accept" and self.url is None:
            answer = ElicitationAnswer("accept", complete_content(self.schema, answer.content), answer.reason)
        reply.set_result(answer)

    async def accept(self, content: Mapping[str, Any] | None = None) -> None:
        """Accept with ``content`` (completed with the schema's defaults and checked against it:
        :class:`ElicitationContentError` leaves the question open); URL mode: the user agreed."""
        self.respond(ElicitationAnswer.accept(content))

    async def decline(self) -> None:
        """The user said no."""
        self.respond(ElicitationAnswer.decline())

    async def cancel(self) -> None:
        """The user dismissed the question without answering."""
        self.respond(ElicitationAnswer.cancel())

    def add_done_callback(self, callback: Callable[[ElicitationRequest], None]) -> None:
        """Call ``callback(self)`` once a streamed question is answered or withdrawn."""
        reply = self._reply
        if reply is None:
            raise ElicitationError("only a streamed question is answered later")
        reply.add_done_callback(lambda _: callback(self))

    def _stream(self) -> None:
        """Make this question one that is answered by its methods (by whoever streams it)."""
        if self._reply is None:
            object.__setattr__(self, "_reply", asyncio.get_running_loop().create_future())

    def decline_unanswered(self, reason: str) -> None:
        """Decline on the user's behalf, if still open (``reason`` goes to the calling code)."""
        if self.pending:
            assert self._reply is not None
            self._reply.set_result(ElicitationAnswer("decline", reason=reason))

    async def _wait(self) -> ElicitationAnswer:
        """The answer; cancelling the waiter withdraws the question."""
        assert self._reply is not None
        return await self._reply


@dataclass(frozen=True)
class ElicitationAnswer:
    """The application's answer: ``accept`` with ``content``, ``decline`` or ``cancel``."""

    action: Literal["accept", "decline", "cancel"]
    content: Mapping[str, Any] = field(default_factory=dict)
    """The form's values (``accept`` only); properties left out get the schema's defaults."""
    reason: str | None = field(default=None, compare=False)
    """Why ipybox answered on the user's behalf (told to the calling code on its stderr)."""

    @classmethod
    def accept(cls, content: Mapping[str, Any] | None = None) -> ElicitationAnswer:
        """Accept with ``content`` (default: the schema's defaults only)."""
        return cls("accept", dict(content or {}))

    @classmethod
    def decline(cls) -> ElicitationAnswer:
        """The user said no."""
        return cls("decline")

    @classmethod
    def cancel(cls) -> ElicitationAnswer:
        """The user dismissed the question without answering."""
        return cls("cancel")


Elicit = Callable[[ElicitationRequest], Awaitable[ElicitationAnswer]]
"""The application's answer to an :class:`ElicitationRequest`."""


class ElicitationContentError(ValueError):
    """Accepted content that does not match the requested schema."""


class ElicitationError(IpyboxError, RuntimeError):
    """A streamed question cannot take this answer (answered already, withdrawn, not streamed)."""


def complete_content(schema: Mapping[str, Any], content: Mapping[str, Any]) -> dict[str, Any]:
    """``content`` with the schema's defaults filled in, checked against ``schema``.

    Raises:
        ElicitationContentError: a value breaks the schema (one line: which value and why).
    """
    import jsonschema  # type: ignore[import-untyped]  # no type information ships with it

    request = ElicitationRequest(server="", tool=None, message="", schema=schema)
    completed = {**request.defaults, **content}
    validator = jsonschema.Draft202012Validator(dict(schema))
    error = jsonschema.exceptions.best_match(validator.iter_errors(completed))
    if error is not None:
        where = ".".join(str(part) for part in error.absolute_path)
        raise ElicitationContentError(f"{where + ': ' if where else ''}{error.message}")
    return completed
