"""A transport wrapper that repairs off-spec server results before the strict mcp 2.x client sees them.

The mcp 2.x client validates every result against the protocol's wire schema: one tool with an
``inputSchema`` lacking ``"type": "object"`` makes ``tools/list`` (and every ``tools/call``) of the
whole server fail. :class:`LenientTransport` sits between the transport and the session. It remembers
which method each outgoing request called, and repairs the matching results:

- ``tools/list``: a tool is repaired (missing input schema or ``type``; an output schema whose root
  is not an object is dropped; malformed optional fields such as ``annotations`` are dropped) or, if
  it cannot be repaired, left out; each case is reported with a :class:`McpCompatibilityWarning`
  naming the server and the tool.
- ``tools/call``: content blocks of unknown types become text blocks holding their JSON, and
  ``structuredContent`` without ``content`` gets a JSON text block.

A response larger than ``max_message_bytes`` (as JSON) becomes a JSON-RPC error saying so, on
every transport alike (an SSE event over the limit never arrives: the SDK's reader refuses it).

It also reports the end of the read stream (the server closed the connection) through ``on_closed``.
"""

from __future__ import annotations

import json
import logging
import warnings
from collections.abc import Callable
from types import TracebackType
from typing import Any, Self

import anyio
from mcp.client._transport import ReadStream, Transport, TransportStreams, WriteStream
from mcp.shared.message import SessionMessage
from mcp_types import INTERNAL_ERROR, ErrorData, JSONRPCError, JSONRPCRequest, JSONRPCResponse
from mcp_types.methods import parse_server_result
from mcp_types.version import (
    HANDSHAKE_PROTOCOL_VERSIONS,
    KNOWN_PROTOCOL_VERSIONS,
    LATEST_HANDSHAKE_VERSION,
    MODERN_PROTOCOL_VERSIONS,
)
from pydantic import ValidationError

from ipybox_core.mcp.results import over_limit_message

logger = logging.getLogger(__name__)

_CONTENT_TYPES = frozenset({"text", "image", "audio", "resource_link", "resource"})
_OPTIONAL_TOOL_FIELDS = frozenset({"title", "description", "annotations", "icons", "execution", "_meta"})


class McpCompatibilityWarning(UserWarning):
    """An MCP server sent off-spec data that ipybox repaired or left out."""


def _warn(server: str, message: str) -> None:
    warnings.warn(f"MCP server {server!r}: {message}", McpCompatibilityWarning, stacklevel=2)


def _validation_problems(result: dict[str, Any], method: str, version: str) -> list[tuple[Any, ...]] | None:
    """Error locations of ``result`` under the protocol schema, or ``None`` when it is valid."""
    try:
        parse_server_result(method, version, result)
    except ValidationError as exc:
        return [tuple(error["loc"]) for error in exc.errors()]
    except (
        KeyError,
        ValueError,
    ):  # a method or version the schema table does not know: let the session decide
        return None
    return None


def _repair_schemas(tool: dict[str, Any], version: str) -> tuple[str | None, list[str]]:
    """Repair the tool's schemas in place: (why the tool is unusable or None, notes on repairs)."""
    notes: list[str] = []
    schema = tool.get("inputSchema")
    if not isinstance(schema, dict):
        tool["inputSchema"] = {"type": "object", "properties": {}}
        notes.append("has no inputSchema; assuming it takes no parameters")
    elif "type" not in schema:
        tool["inputSchema"] = {"type": "object", **schema}
        notes.append('inputSchema lacks "type": "object"; repaired')
    elif schema["type"] != "object":
        return f"inputSchema has type {schema['type']!r}, not 'object' (a tool takes named arguments)", notes
    output = tool.get("outputSchema")
    object_root_required = version in HANDSHAKE_PROTOCOL_VERSIONS  # 2026-07-28 allows any root
    if output is not None and (
        not isinstance(output, dict) or (object_root_required and output.get("type") != "object")
    ):
        del tool["outputSchema"]
        notes.append("outputSchema root is not an object; ignored (results are treated as text)")
    return None, notes


def repair_tool_listing(result: dict[str, Any], *, server: str, version: str) -> None:
    """Repair a ``tools/list`` result in place, leaving out tools that cannot be repaired."""
    tools = result.get("tools")
    if not isinstance(tools, list):
        _warn(server, f"tools/list returned no list of tools ({type(tools).__name__}); treating it as empty")
        result["tools"] = []
        return
    repaired: list[dict[str, Any]] = []
    for index, tool in enumerate(tools):
        if not isinstance(tool, dict) or not isinstance(tool.get("name"), str):
            _warn(server, f"tool #{index} of tools/list has no name; left out")
            continue
        problem, notes = _repair_schemas(tool, version)
        for note in notes:
            _warn(server, f"tool {tool['name']!r}: {note}")
        if problem is not None:
            _warn(server, f"tool {tool['name']!r} left out: {problem}")
            continue
        repaired.append(tool)
    envelope = {key: value for key, value in result.items() if key != "tools"}
    # one validation of the whole listing; only the tools it flags are looked at one by one
    problems = _validation_problems({**envelope, "tools": repaired}, "tools/list", version) or []
    flagged = {loc[1] for loc in problems if len(loc) > 1 and loc[0] == "tools" and isinstance(loc[1], int)}
    kept: list[dict[str, Any]] = []
    for index, tool in enumerate(repaired):
        problem = (
            _drop_malformed_fields(tool, envelope, server=server, version=version)
            if index in flagged
            else None
        )
        if problem is not None:
            _warn(server, f"tool {tool['name']!r} left out: {problem}")
            continue
        kept.append(tool)
    result["tools"] = kept


def _tool_problems(tool: dict[str, Any], envelope: dict[str, Any], version: str) -> list[tuple[Any, ...]]:
    """Schema error locations inside ``tool`` (validated alone, in the listing's envelope)."""
    problems = _validation_problems({**envelope, "tools": [tool]}, "tools/list", version) or []
    return [loc for loc in problems if loc[:1] == ("tools",)]


def _drop_malformed_fields(
    tool: dict[str, Any], envelope: dict[str, Any], *, server: str, version: str
) -> str | None:
    """Drop optional fields that break the schema; the remaining problem, if any."""
    problems = _tool_problems(tool, envelope, version)
    if not problems:
        return None
    droppable = {loc[2] for loc in problems if len(loc) > 2 and loc[2] in _OPTIONAL_TOOL_FIELDS}
    if droppable:
        for field in sorted(droppable):
            tool.pop(field, None)
        _warn(server, f"tool {tool['name']!r}: malformed {', '.join(sorted(droppable))} ignored")
        problems = _tool_problems(tool, envelope, version)
    if not problems:
        return None
    return "malformed " + ", ".join(
        sorted({".".join(str(part) for part in loc[2:]) or "tool" for loc in problems})
    )


def _as_text_block(value: Any) -> dict[str, Any]:
    return {"type": "text", "text": json.dumps(value, default=str)}


def repair_call_result(result: dict[str, Any], *, server: str, version: str) -> None:
    """Repair a ``tools/call`` result in place (content blocks and missing content)."""
    if "content" not in result:
        if "structuredContent" in result:
            result["content"] = [_as_text_block(result["structuredContent"])]
        elif (
            "task" in result
            or "inputRequests" in result
            or result.get("resultType") not in (None, "complete")
        ):
            return  # not a plain CallToolResult (task or input-required shapes): leave it to the session
        else:
            result["content"] = []
        return
    content = result["content"]
    if not isinstance(content, list):
        _warn(
            server,
            f"tools/call returned content that is not a list ({type(content).__name__}); wrapped as text",
        )
        result["content"] = [_as_text_block(content)]
        return
    for index, block in enumerate(content):
        kind = block.get("type") if isinstance(block, dict) else None
        if kind not in _CONTENT_TYPES:
            _warn(
                server,
                f"tools/call returned a content block of unknown type {kind!r}; passed on as JSON text",
            )
            content[index] = _as_text_block(block)
    problems = _validation_problems(result, "tools/call", version) or []
    broken = {
        loc[at + 1]
        for loc in problems
        for at in range(len(loc) - 1)
        if loc[at] == "content" and isinstance(loc[at + 1], int)
    }
    for index in sorted(broken):
        if index < len(content):
            _warn(server, "tools/call returned a malformed content block; passed on as JSON text")
            content[index] = _as_text_block(content[index])


class _StreamWrapper:
    """Delegates a stream's lifecycle (and any other attribute) to the wrapped stream."""

    def __init__(self, inner: ReadStream[SessionMessage | Exception] | WriteStream[SessionMessage]) -> None:
        self._inner = inner

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> Self:
        await self._inner.__aenter__()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        return await self._inner.__aexit__(exc_type, exc, tb)

    def __getattr__(self, name: str) -> Any:  # e.g. ``last_context``, read by the dispatcher
        return getattr(self._inner, name)


class _StdoutGarbage(Exception):
    """A stdio server wrote a line that is not JSON-RPC: the stream ends here."""


_END_OF_STREAM = (StopAsyncIteration, anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError)


class _RepairingReadStream(_StreamWrapper):
    """The transport's read stream, repairing results and reporting its end."""

    def __init__(self, inner: ReadStream[SessionMessage | Exception], owner: LenientTransport) -> None:
        super().__init__(inner)
        self._reader = inner
        self._owner = owner

    async def receive(self) -> SessionMessage | Exception:
        try:
            item = await self._reader.receive()
        except _END_OF_STREAM:
            self._owner.mark_closed()
            raise
        try:
            return self._owner.repair(item)
        except _StdoutGarbage:
            raise anyio.EndOfStream from None

    def __aiter__(self) -> _RepairingReadStream:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            item = await self._reader.__anext__()
        except _END_OF_STREAM:
            self._owner.mark_closed()
            raise
        try:
            return self._owner.repair(item)
        except _StdoutGarbage:
            raise StopAsyncIteration from None


class _RecordingWriteStream(_StreamWrapper):
    """The transport's write stream, remembering the method of each outgoing request."""

    def __init__(self, inner: WriteStream[SessionMessage], owner: LenientTransport) -> None:
        super().__init__(inner)
        self._writer = inner
        self._owner = owner

    async def send(self, item: SessionMessage, /) -> None:
        if isinstance(item.message, JSONRPCRequest):
            self._owner.methods[str(item.message.id)] = item.message.method
        await self._writer.send(item)


class LenientTransport:
    """Wrap ``inner`` (any mcp ``Transport``) so off-spec results are repaired (see module docs)."""

    def __init__(
        self,
        inner: Transport,
        *,
        server: str,
        on_closed: Callable[[], None] | None = None,
        strict_stdout: bool = False,
        max_message_bytes: int | None = None,
    ) -> None:
        self._inner = inner
        self._max_message_bytes = max_message_bytes
        self._server = server
        self._on_closed = on_closed
        self._strict_stdout = strict_stdout
        self.stdout_garbage: str | None = None
        """With ``strict_stdout`` (a stdio server): the first line that was not a JSON-RPC message;
        the stream ends there instead of waiting for answers that cannot come."""
        self.methods: dict[str, str] = {}
        """Method of each request still waiting for its response, by request id."""
        self.protocol_version: str | None = None
        """The negotiated protocol version (from ``initialize``, or set by the connection)."""

    async def __aenter__(self) -> TransportStreams:
        read, write = await self._inner.__aenter__()
        return _RepairingReadStream(read, self), _RecordingWriteStream(write, self)

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        return await self._inner.__aexit__(exc_type, exc, tb)

    def mark_closed(self) -> None:
        if self._on_closed is not None:
            self._on_closed()

    def repair(self, item: SessionMessage | Exception) -> SessionMessage | Exception:
        if not isinstance(item, SessionMessage):
            if self._strict_stdout and isinstance(item, ValueError):
                self.stdout_garbage = _offending_line(item)
                self.mark_closed()
                raise _StdoutGarbage
            return item
        message = item.message
        if isinstance(message, JSONRPCError):
            self.methods.pop(str(message.id), None)
        if not isinstance(message, JSONRPCResponse) or not isinstance(message.result, dict):
            return item
        method = self.methods.pop(str(message.id), None)
        if "resultType" not in message.result and (
            method == "server/discover" or self.protocol_version in MODERN_PROTOCOL_VERSIONS
        ):  # 2026-07-28: an absent resultType means "complete"; the SDK's models require it
            message.result["resultType"] = "complete"
        if method == "tools/call" and self._over_limit(message.result):
            assert self._max_message_bytes is not None
            error = ErrorData(code=INTERNAL_ERROR, message=over_limit_message(self._max_message_bytes))
            return SessionMessage(JSONRPCError(jsonrpc="2.0", id=message.id, error=error))
        version = self.protocol_version or LATEST_HANDSHAKE_VERSION
        if version not in KNOWN_PROTOCOL_VERSIONS:
            version = LATEST_HANDSHAKE_VERSION
        try:
            if method == "initialize":
                self.protocol_version = str(message.result.get("protocolVersion") or "") or None
            elif method == "tools/list":
                repair_tool_listing(message.result, server=self._server, version=version)
            elif method == "tools/call":
                repair_call_result(message.result, server=self._server, version=version)
        except Exception:  # a repair must never break the connection; the session validates anyway
            logger.exception("repairing a %s result from MCP server %r failed", method, self._server)
        return item

    def _over_limit(self, result: dict[str, Any]) -> bool:
        limit = self._max_message_bytes
        if limit is None:
            return False
        size = len(json.dumps(result, ensure_ascii=False, separators=(",", ":"), default=str).encode())
        return size > limit


def _offending_line(error: ValueError) -> str:
    """The stdout line a parse error is about (pydantic keeps it as the error's input)."""
    line: Any = str(error)
    if isinstance(error, ValidationError) and error.errors():
        line = error.errors()[0].get("input", line)
    text = line if isinstance(line, str) else json.dumps(line, default=str)
    return text if len(text) <= 200 else text[:197] + "..."
