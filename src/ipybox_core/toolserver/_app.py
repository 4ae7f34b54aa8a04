"""The HTTP endpoints of the tool server (``/call``, ``/shell``); see :mod:`ipybox_core.runtime`.

A plain ASGI application (served by uvicorn): two routes do not need a framework, and the tool
call path is the hot one, so each request costs one task for the work and one watching for the
kernel to hang up, and an answer ready before the first heartbeat goes out in one piece with a
``Content-Length`` (heartbeats, chunked, only for calls that wait).
"""

from __future__ import annotations

import asyncio
import hmac
import itertools
import json
import logging
import re
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import Any, Protocol

from ipybox_core.approval import ApprovalGate, ApprovalRequest
from ipybox_core.approval.gate import LIMIT_DECIDER
from ipybox_core.approval.request import CallOutcome, JsonArguments
from ipybox_core.errors import McpServerError, McpTimeout, ToolError, UnknownToolError
from ipybox_core.mcp.results import content_text
from ipybox_core.mcp.types import ToolInfo
from ipybox_core.toolserver._parse_budget import ParseBudget

logger = logging.getLogger("ipybox.toolserver")

MAX_JSON_DEPTH = 400
"""Deepest nesting of arrays and objects a request body may have (the JSON parser recurses)."""

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]

_NDJSON = (b"content-type", b"application/x-ndjson")
_CLOSE = (b"connection", b"close")  # for answers given before the request body was read to its end


class ToolCallOutcome(Protocol):
    """What a backend returns for a successful call (``ipybox_core.mcp.ToolCallResult`` fits)."""

    @property
    def structured(self) -> Any: ...

    @property
    def content(self) -> list[dict[str, Any]]: ...

    @property
    def notices(self) -> tuple[str, ...]:
        """Warnings about the call for the code (e.g. its server was restarted and lost its state)."""
        ...


class ToolBackend(Protocol):
    """Where approved calls go (``ipybox_core.mcp.McpRegistry`` fits)."""

    def tool(self, server: str, tool: str) -> ToolInfo:
        """The tool's description; raises :class:`UnknownToolError`."""
        ...

    async def call(self, server: str, tool: str, arguments: dict[str, Any]) -> ToolCallOutcome:
        """Run the call; raises ToolError, McpServerError (incl. McpTimeout) or UnknownToolError."""
        ...


@dataclass(frozen=True)
class _Failure:
    type: str
    message: str
    status: int = 400
    close: bool = False  # the body was not read to its end: the connection cannot be reused

    async def send(self, send: Send) -> None:
        await _send_whole(send, error_line(self.type, self.message), self.status, close=self.close)


def _line(payload: dict[str, Any]) -> bytes:
    return json.dumps(payload, ensure_ascii=False, default=repr).encode() + b"\n"


def error_line(kind: str, message: str, *, code: int | None = None) -> bytes:
    """The protocol's error line (``{"ok": false, "error": {...}}``), as the runtime raises it;
    ``code``: a tool error's JSON-RPC error code."""
    error: dict[str, Any] = {"type": kind, "message": message}
    if code is not None:
        error["code"] = code
    return _line({"ok": False, "error": error})


async def _send_whole(send: Send, body: bytes, status: int = 200, *, close: bool = False) -> None:
    headers = [_NDJSON, (b"content-length", str(len(body)).encode())]
    if close:
        headers.append(_CLOSE)
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def build_app(
    backend: ToolBackend,
    gate: ApprovalGate,
    token: str,
    heartbeat: float,
    *,
    max_request_bytes: int,
    body_timeout: float,
) -> App:
    """The ASGI app: token check, bounded body, approval gate, then the backend.

    A call keeps its body's bytes, not the parsed arguments, while it waits for approval; the
    arguments of calls that run are parsed within a :class:`ParseBudget` of ``max_request_bytes``.
    """

    expected = f"Bearer {token}".encode()
    costs = ParseBudget(max_request_bytes)

    async def read_body(
        scope: Scope, receive: Receive, keys: tuple[str, ...], *, arguments: bool
    ) -> tuple[bytes, _Fields] | _Failure:
        raw = await _read_limited(scope, receive, max_request_bytes, body_timeout)
        if isinstance(raw, _Failure):
            return raw
        # Checked and dropped in one step (off the event loop if large): only the small fields stay.
        fields = await costs.parse(len(raw), lambda: _fields(raw, keys, arguments=arguments))
        return fields if isinstance(fields, _Failure) else (raw, fields)

    async def call(scope: Scope, receive: Receive, send: Send) -> None:
        read = await read_body(scope, receive, ("server", "tool"), arguments=True)
        if isinstance(read, _Failure):
            return await read.send(send)
        raw, fields = read
        server, tool = fields.strings["server"], fields.strings["tool"]
        try:
            info = backend.tool(server, tool)
        except UnknownToolError as exc:
            return await _send_whole(send, error_line("unknown_tool", str(exc)))
        arguments = JsonArguments(raw)
        approval = ApprovalRequest(
            kind="mcp",
            server=server,
            tool=tool,
            args=arguments,
            annotations=info.annotations,
            output_mark=fields.mark,
            input_schema=info.input_schema,
        )
        approval.expect_outcome()  # what the call came to, for the application's traces and events
        await _answer(
            lambda: _approved_call(backend, gate, approval, arguments, fields.unmarked, costs),
            receive,
            send,
            heartbeat,
        )

    async def shell(scope: Scope, receive: Receive, send: Send) -> None:
        read = await read_body(scope, receive, ("command",), arguments=False)
        if isinstance(read, _Failure):
            return await read.send(send)
        fields = read[1]
        del read  # the command is all a waiting shell request keeps of its body
        approval = ApprovalRequest(
            kind="shell",
            server="",
            tool="shell",
            args={"command": fields.strings["command"]},
            output_mark=fields.mark,
        )
        await _answer(lambda: _approved_shell(gate, approval, fields.unmarked), receive, send, heartbeat)

    routes = {"/call": call, "/shell": shell}

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1000})
            return
        if scope["type"] != "http":
            return
        route = routes.get(scope["path"])
        if route is None:
            return await _send_whole(send, error_line("bad_request", "not found"), 404)
        if scope["method"] != "POST":
            return await _send_whole(send, error_line("bad_request", "use POST"), 405)
        authorization = next((v for k, v in scope["headers"] if k == b"authorization"), b"")
        if not hmac.compare_digest(authorization, expected):
            return await _Failure("unauthorized", "invalid token", 401, close=True).send(send)
        await route(scope, receive, send)

    return app


@dataclass(frozen=True)
class _Fields:
    """What the tool server keeps of a checked request body (the arguments stay in its bytes)."""

    strings: dict[str, str]
    mark: str | None
    unmarked: bool


def _fields(raw: bytes, keys: tuple[str, ...], *, arguments: bool) -> _Fields | _Failure:
    """Check a body (JSON, string ``keys``, an ``arguments`` object) and keep its small fields.

    The parsed tree does not outlive this call: a waiting call holds the body's bytes only.
    """
    body = _parse_json(raw)
    if isinstance(body, _Failure):
        return body
    if not isinstance(body, dict) or any(not isinstance(body.get(key), str) for key in keys):
        return _Failure("bad_request", f"request body needs string fields {', '.join(keys)}")
    if arguments and not isinstance(body.get("arguments") or {}, dict):
        return _Failure("bad_request", "arguments must be a JSON object")
    return _Fields({key: body[key] for key in keys}, _output_mark(body), _unmarked(body))


def _output_mark(body: dict[str, Any]) -> str | None:
    """The output mark a request carries (see ``ipybox_core.kernel._marks``), if well-formed."""
    mark = body.get("mark")
    return mark if isinstance(mark, str) and 0 < len(mark) <= 64 else None


def _unmarked(body: dict[str, Any]) -> bool:
    """Whether the runtime left the output mark out because an answer said none was needed."""
    return body.get("unmarked") is True and _output_mark(body) is None


def _too_large(limit: int) -> _Failure:
    return _Failure(
        "bad_request",
        f"request too large: the tool server accepts at most {limit} bytes per call "
        "(max_request_bytes); pass large data another way, e.g. as a file",
        413,
        close=True,
    )


async def _read_limited(scope: Scope, receive: Receive, limit: int, timeout: float) -> bytes | _Failure:
    """The request body, read chunk by chunk and given up as soon as it is known to exceed ``limit``.

    An announced ``Content-Length`` over the limit is refused before a byte of the body is read; a
    body without one (chunked) is refused at the first chunk past the limit. Either way the answer
    closes the connection, so the rest of the body is never read.
    """
    announced = next((v for k, v in scope["headers"] if k == b"content-length"), None)
    if announced is not None and announced.isdigit() and int(announced) > limit:
        return _too_large(limit)
    chunks: list[bytes] = []
    size = 0
    try:
        async with asyncio.timeout(timeout):
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    return _Failure(
                        "bad_request", "the client went away while sending the request", close=True
                    )
                chunk = message.get("body", b"")
                size += len(chunk)
                if size > limit:
                    return _too_large(limit)
                chunks.append(chunk)
                if not message.get("more_body", False):
                    break
    except TimeoutError:
        return _Failure("bad_request", f"request body not received within {timeout:g} s", 408, close=True)
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


# A string runs to its closing quote, or to the end of the body when unterminated: every quote
# starts a match, so the scan stays linear (a pattern that can fail retries at each escaped quote).
_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*(?:"|\\?\Z)', re.DOTALL)
_NOT_BRACKET = bytes(b for b in range(256) if b not in b"[]{}")
_NESTING_STEP = [0] * 256
for _byte in b"[{":
    _NESTING_STEP[_byte] = 1
for _byte in b"]}":
    _NESTING_STEP[_byte] = -1


def _json_too_deep(raw: bytes, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether UTF-8 JSON ``raw`` nests arrays/objects deeper than ``limit``, found without recursion.

    Strings are cut out first, ended as the parser ends them (brackets inside do not nest), then a
    running sum over the remaining brackets gives the depth the parser would reach. Invalid JSON
    may be over-counted; it is refused either way.
    """
    if raw.count(b"[") + raw.count(b"{") <= limit:
        return False  # not enough openings to get that deep: the common case, no scan
    brackets = _JSON_STRING.sub(b"", raw).translate(None, _NOT_BRACKET)
    if brackets.count(b"[") + brackets.count(b"{") <= limit:
        return False
    return max(itertools.accumulate(map(_NESTING_STEP.__getitem__, brackets))) > limit


def _parse_json(raw: bytes) -> Any:
    """The parsed body, or a :class:`_Failure` for non-UTF-8, too deeply nested or invalid JSON."""
    try:
        text = raw.decode("utf-8")  # only then does every ASCII byte stand for itself (for the scan)
    except UnicodeDecodeError:
        return _Failure("bad_request", "request body is not UTF-8 JSON")
    if _json_too_deep(raw):
        return _Failure(
            "bad_request", f"request body is nested deeper than {MAX_JSON_DEPTH} levels of arrays/objects"
        )
    try:
        return json.loads(text)
    except ValueError:
        return _Failure("bad_request", "request body is not JSON")


_MARK_NEEDED = (
    "mark_needed",
    "the approval policy may ask the application now: send the request with an output mark",
)


def _rejected(decision_by: str) -> str:
    if decision_by == LIMIT_DECIDER:  # refused before anyone was asked
        return "unavailable"
    return "approval_timeout" if decision_by == "timeout" else "rejected"


_NOT_RUN = CallOutcome(ok=False, error="not_run")


async def _approved_call(
    backend: ToolBackend,
    gate: ApprovalGate,
    approval: ApprovalRequest,
    arguments: JsonArguments,
    unmarked: bool,
    costs: ParseBudget,
) -> bytes:
    try:
        # An unmarked request may only pass a gate that never asks: checked right before deciding
        # (no suspension in between), so a request the application sees always carries its mark.
        if unmarked and not gate.never_asks:
            return error_line(*_MARK_NEEDED)
        decision = await gate.decide(approval)
        if not decision.approved:
            kind = _rejected(decision.decided_by)
            message = f"{approval.name} was rejected: {decision.reason or 'no reason given'}"
            approval.finish(CallOutcome(ok=False, text=message, error=kind))
            return error_line(kind, message)
        if decision.arguments is not None:
            return await _run_call(backend, gate, approval, decision.arguments)
        async with costs.hold(arguments.size):  # the parsed arguments live while the call runs
            parsed = await costs.parse(arguments.size, arguments.parse)
            return await _run_call(backend, gate, approval, parsed)
    finally:  # whatever ended it (a refusal, a lost connection, a cancelled call): it is known now
        approval.finish(CallOutcome(ok=False, text=f"{approval.name} did not run", error="not_run"))
        gate.report(approval, await approval.outcome() or _NOT_RUN)  # done: no suspension


async def _run_call(
    backend: ToolBackend, gate: ApprovalGate, approval: ApprovalRequest, arguments: dict[str, Any]
) -> bytes:
    try:
        result = await backend.call(approval.server, approval.tool, arguments)
    except ToolError as exc:
        return _failed(approval, "tool_error", exc, code=exc.code)
    except McpTimeout as exc:
        return _failed(approval, "timeout", exc)
    except McpServerError as exc:
        return _failed(approval, "server_error", exc)
    except UnknownToolError as exc:
        return _failed(approval, "unknown_tool", exc)
    approval.finish(CallOutcome(ok=True, structured=result.structured, text=content_text(result.content)))
    answer: dict[str, Any] = {"structured": result.structured, "content": result.content}
    if result.notices:
        answer["notices"] = list(result.notices)  # the kernel prints them to the code's stderr
        for notice in result.notices:
            await gate.note(approval, notice)
    message: dict[str, Any] = {"ok": True, "result": answer}
    if gate.never_asks:
        message["marks"] = False  # the runtime may leave the output mark out of its next requests
    return _line(message)


def _failed(approval: ApprovalRequest, kind: str, exc: Exception, *, code: int | None = None) -> bytes:
    approval.finish(CallOutcome(ok=False, text=str(exc), error=kind))
    return error_line(kind, str(exc), code=code)


async def _approved_shell(gate: ApprovalGate, approval: ApprovalRequest, unmarked: bool) -> bytes:
    if unmarked and not gate.never_asks:
        return error_line(*_MARK_NEEDED)
    decision = await gate.decide(approval)
    if not decision.approved:
        kind = _rejected(decision.decided_by)
        return error_line(kind, f"shell command rejected: {decision.reason or 'no reason given'}")
    message: dict[str, Any] = {"ok": True, "result": {}}
    if gate.never_asks:
        message["marks"] = False
    return _line(message)


WATCH_AFTER = 0.01
"""Seconds a call runs before the tool server starts watching for the kernel to hang up (most
calls are answered sooner, and cost no watcher task)."""


async def _answer(
    work: Callable[[], Awaitable[bytes]], receive: Receive, send: Send, heartbeat: float
) -> None:
    """Answer with ``work``'s line: in one piece (``Content-Length``) if it is done within
    ``heartbeat`` seconds, else as a chunked stream of heartbeat lines (one per ``heartbeat``)
    ending with it.

    ``work`` runs in this task. A call still running after :data:`WATCH_AFTER` seconds gets a
    watcher: when the kernel drops the connection (its code was interrupted), ``work`` is
    cancelled, which abandons the approval request and cancels the MCP call. The heartbeats let
    the kernel tell a slow decision from a lost host.
    """
    handler = asyncio.current_task()
    assert handler is not None
    loop = asyncio.get_running_loop()
    working = True  # ``work`` runs: a hang-up cancels it
    started = False  # the streamed answer's head is out
    gone = False  # the kernel hung up
    helpers: list[asyncio.Task[None]] = []

    async def watch() -> None:
        nonlocal gone
        while (await receive())["type"] != "http.disconnect":
            pass
        gone = True
        if working:
            handler.cancel()

    async def beat() -> None:
        nonlocal started
        while True:
            await asyncio.sleep(heartbeat)
            if not started:
                await send({"type": "http.response.start", "status": 200, "headers": [_NDJSON]})
                started = True
            await send({"type": "http.response.body", "body": b"\n", "more_body": True})

    def start_helpers() -> None:
        helpers.append(loop.create_task(watch()))
        helpers.append(loop.create_task(beat()))

    timer = loop.call_later(min(WATCH_AFTER, heartbeat), start_helpers)
    try:
        try:
            line = await work()
        except asyncio.CancelledError:
            if gone:  # our own cancellation: nobody is left to answer
                handler.uncancel()
                return
            raise
        except Exception as exc:  # a bug must still produce an answer, never a dropped connection
            logger.exception("tool server: unexpected error")
            line = error_line("internal", f"internal tool server error: {type(exc).__name__}: {exc}")
        finally:
            working = False
    finally:
        timer.cancel()
        for helper in helpers:
            helper.cancel()
        if helpers:  # a heartbeat is never cut in half by the answer
            await asyncio.wait(helpers)
    if gone:
        return
    if started:
        await send({"type": "http.response.body", "body": line, "more_body": False})
    else:
        await _send_whole(send, line)
