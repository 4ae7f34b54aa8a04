"""The HTTP endpoints of the tool server (``/call``, ``/shell``); see :mod:`ipybox_core.runtime`."""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from ipybox_core.approval import ApprovalGate, ApprovalRequest
from ipybox_core.errors import McpServerError, McpTimeout, ToolError, UnknownToolError
from ipybox_core.mcp.types import ToolInfo

logger = logging.getLogger("ipybox.toolserver")


class ToolCallOutcome(Protocol):
    """What a backend returns for a successful call (``ipybox_core.mcp.ToolCallResult`` fits)."""

    @property
    def structured(self) -> Any: ...

    @property
    def content(self) -> list[dict[str, Any]]: ...


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


def _line(payload: dict[str, Any]) -> bytes:
    return json.dumps(payload, ensure_ascii=False, default=repr).encode() + b"\n"


def _error(kind: str, message: str) -> bytes:
    return _line({"ok": False, "error": {"type": kind, "message": message}})


def build_app(backend: ToolBackend, gate: ApprovalGate, token: str, heartbeat: float) -> Starlette:
    """The ASGI app: token check, approval gate, then the backend."""

    expected = f"Bearer {token}".encode()

    def authorized(request: Request) -> bool:
        return hmac.compare_digest(request.headers.get("authorization", "").encode(), expected)

    async def read_body(request: Request, *keys: str) -> dict[str, Any] | _Failure:
        try:
            body = json.loads(await request.body())
        except ValueError:
            return _Failure("bad_request", "request body is not JSON")
        if not isinstance(body, dict) or any(not isinstance(body.get(key), str) for key in keys):
            return _Failure("bad_request", f"request body needs string fields {', '.join(keys)}")
        return body

    async def call(request: Request) -> Response:
        if not authorized(request):
            return Response(_error("unauthorized", "invalid token"), status_code=401)
        body = await read_body(request, "server", "tool")
        if isinstance(body, _Failure):
            return Response(_error(body.type, body.message), status_code=400)
        server, tool, arguments = body["server"], body["tool"], body.get("arguments") or {}
        if not isinstance(arguments, dict):
            return Response(_error("bad_request", "arguments must be a JSON object"), status_code=400)
        try:
            info = backend.tool(server, tool)
        except UnknownToolError as exc:
            return Response(_error("unknown_tool", str(exc)))
        approval = ApprovalRequest(
            kind="mcp", server=server, tool=tool, args=arguments, annotations=info.annotations
        )
        return _streamed(lambda: _approved_call(backend, gate, approval), heartbeat)

    async def shell(request: Request) -> Response:
        if not authorized(request):
            return Response(_error("unauthorized", "invalid token"), status_code=401)
        body = await read_body(request, "command")
        if isinstance(body, _Failure):
            return Response(_error(body.type, body.message), status_code=400)
        approval = ApprovalRequest(kind="shell", server="", tool="shell", args={"command": body["command"]})
        return _streamed(lambda: _approved_shell(gate, approval), heartbeat)

    return Starlette(
        routes=[Route("/call", call, methods=["POST"]), Route("/shell", shell, methods=["POST"])]
    )


async def _approved_call(backend: ToolBackend, gate: ApprovalGate, approval: ApprovalRequest) -> bytes:
    decision = await gate.decide(approval)
    if not decision.approved:
        kind = "approval_timeout" if decision.decided_by == "timeout" else "rejected"
        return _error(kind, f"{approval.name} was rejected: {decision.reason or 'no reason given'}")
    arguments = decision.arguments if decision.arguments is not None else approval.args
    try:
        result = await backend.call(approval.server, approval.tool, arguments)
    except ToolError as exc:
        return _error("tool_error", str(exc))
    except McpTimeout as exc:
        return _error("timeout", str(exc))
    except McpServerError as exc:
        return _error("server_error", str(exc))
    except UnknownToolError as exc:
        return _error("unknown_tool", str(exc))
    return _line({"ok": True, "result": {"structured": result.structured, "content": result.content}})


async def _approved_shell(gate: ApprovalGate, approval: ApprovalRequest) -> bytes:
    decision = await gate.decide(approval)
    if not decision.approved:
        kind = "approval_timeout" if decision.decided_by == "timeout" else "rejected"
        return _error(kind, f"shell command rejected: {decision.reason or 'no reason given'}")
    return _line({"ok": True, "result": {}})


def _streamed(work: Callable[[], Awaitable[bytes]], heartbeat: float) -> StreamingResponse:
    """Answer with heartbeat lines until ``work`` is done, then its line.

    The heartbeats let the kernel tell a slow decision from a lost host. When the kernel drops the
    connection (its code was interrupted), the streaming task is cancelled and so is ``work``: the
    approval request is abandoned and the MCP call cancelled.
    """

    async def guarded() -> bytes:
        try:
            return await work()
        except Exception as exc:  # a bug must still produce an answer, never a dropped connection
            logger.exception("tool server: unexpected error")
            return _error("internal", f"internal tool server error: {type(exc).__name__}: {exc}")

    async def body() -> AsyncIterator[bytes]:
        task = asyncio.ensure_future(guarded())
        try:
            while True:
                done, _ = await asyncio.wait({task}, timeout=heartbeat)
                if done:
                    yield task.result()
                    return
                yield b"\n"
        finally:
            if not task.done():
                task.cancel()

    return StreamingResponse(body(), media_type="application/x-ndjson")
