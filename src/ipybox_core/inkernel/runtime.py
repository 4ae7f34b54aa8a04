"""Kernel-side client of the ipybox tool server. Standard library only.

Generated API modules (``mcptools.<server>``) call :func:`call_tool`; it sends the call to the tool
server in the application process and blocks until the application decided and the MCP server
answered. Nothing here can grant itself an approval: the tool server enforces it.

Wire protocol (HTTP/1.1 over a unix socket, or TCP for remote kernels):

``POST /call`` with ``Authorization: Bearer <token>`` and a JSON body
``{"server": ..., "tool": ..., "arguments": {...}}``, or ``POST /shell`` with ``{"command": ...}``.
The response body is newline-delimited: zero or more empty heartbeat lines while the call waits
(for approval or for the MCP server), then one JSON line, either ``{"ok": true, "result": {...}}``
or ``{"ok": false, "error": {"type": ..., "message": ...}}``. A silent connection for longer than
:data:`LOST_HOST_AFTER` seconds means the host is gone.

Configuration comes from the kernel's environment: ``IPYBOX_TOOL_SERVER`` (``unix:/path/tools.sock``
or ``http://host:port``) and ``IPYBOX_TOOL_TOKEN``.
"""

from __future__ import annotations

import base64
import contextlib
import http.client
import json
import os
import socket
import ssl
import sys
import threading
from dataclasses import dataclass, field
from typing import Any, NoReturn
from urllib.parse import urlsplit

from ipybox_core.inkernel.errors import McpServerError, ToolError, ToolServerUnavailable, ToolTimeoutError

__all__ = [
    "LOST_HOST_AFTER",
    "McpServerError",
    "ToolError",
    "ToolResponse",
    "ToolResult",
    "ToolServerUnavailable",
    "ToolTimeoutError",
    "approve_shell_command",
    "call_tool",
]

#: Seconds without a byte (the server sends a heartbeat every few seconds) after which the host is
#: considered lost and the call fails instead of hanging the kernel.
LOST_HOST_AFTER = 30.0

OUTPUT_MARK_MSG = "ipybox_output_mark"
"""The iopub message type of an output mark: ``{"mark": id}``, published before a request that
carries the same id, so that the host hands the request out after the output printed before it."""

_SERVER_ENV = "IPYBOX_TOOL_SERVER"
_TOKEN_ENV = "IPYBOX_TOOL_TOKEN"


@dataclass(frozen=True)
class ToolResponse:
    """What the tool server returned for one successful call."""

    structured: Any = None
    """The tool's structured content (set when the tool has an output schema)."""
    content: list[dict[str, Any]] = field(default_factory=list)
    """The MCP content blocks in wire form (``{"type": "text", "text": ...}``, images, ...)."""

    @property
    def text(self) -> str:
        """All text blocks joined by newlines."""
        return "\n".join(b.get("text", "") for b in self.content if b.get("type") == "text")

    @property
    def has_non_text(self) -> bool:
        return any(b.get("type") != "text" for b in self.content)


class ToolResult(str):
    """The text of a tool result that also carried non-text content (images, audio, resources).

    It *is* the text (a ``str``), so code that treats the result as text keeps working; the blocks
    are in :attr:`content` and images in :attr:`images`. Displaying it in the kernel (last
    expression of a cell, or ``display(result)``) shows the images.
    """

    content: list[dict[str, Any]]

    def __new__(cls, text: str, content: list[dict[str, Any]]) -> ToolResult:
        self = super().__new__(cls, text)
        self.content = content
        return self

    @property
    def images(self) -> list[bytes]:
        """Decoded bytes of every image block."""
        return [base64.b64decode(b["data"]) for b in self.content if b.get("type") == "image"]

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        bundle: dict[str, Any] = {"text/plain": str.__repr__(self)}
        for block in self.content:
            if block.get("type") == "image" and block.get("mimeType") in ("image/png", "image/jpeg"):
                bundle.setdefault(block["mimeType"], block["data"])
        return bundle


def result_text(response: ToolResponse) -> str:
    """The value a tool without an output schema returns: its text, or a :class:`ToolResult`."""
    if response.has_non_text:
        return ToolResult(response.text, response.content)
    return response.text


def call_tool(server: str, tool: str, arguments: dict[str, Any]) -> ToolResponse:
    """Call ``tool`` on the MCP server registered as ``server``; blocks until approved and answered.

    Raises :class:`PermissionError` when the application rejects the call, :class:`ToolError` when
    the tool fails, :class:`ToolTimeoutError` on a timeout and :class:`ToolServerUnavailable` when
    the host cannot be reached.
    """
    result = _request("/call", {"server": server, "tool": tool, "arguments": arguments}, server, tool)
    return ToolResponse(structured=result.get("structured"), content=list(result.get("content") or []))


def approve_shell_command(command: str) -> None:
    """Ask the application to approve a shell command; raises :class:`PermissionError` if rejected."""
    _request("/shell", {"command": command}, "", "")


# --- transport ----------------------------------------------------------------------------------


class _UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("ipybox", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        try:
            sock.connect(self._path)
        except BaseException:
            sock.close()
            raise
        self.sock = sock


_local = threading.local()


def _connection() -> tuple[http.client.HTTPConnection, bool]:
    """A keep-alive connection per thread (tools may be called from several threads at once).

    Returns the connection and whether it was reused from an earlier call.
    """
    address = os.environ.get(_SERVER_ENV)
    if not address:
        raise ToolServerUnavailable(
            f"{_SERVER_ENV} is not set: this kernel was not started by an ipybox executor"
        )
    cached: tuple[str, http.client.HTTPConnection] | None = getattr(_local, "conn", None)
    if cached is not None and cached[0] == address:
        return cached[1], True
    conn: http.client.HTTPConnection
    if address.startswith("unix:"):
        conn = _UnixHTTPConnection(address[len("unix:") :], timeout=LOST_HOST_AFTER)
    else:
        parts = urlsplit(address)
        if parts.scheme == "https":
            context = ssl.create_default_context(cafile=os.environ.get("IPYBOX_TOOL_CA") or None)
            conn = http.client.HTTPSConnection(
                parts.hostname or "", parts.port, timeout=LOST_HOST_AFTER, context=context
            )
        else:
            conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=LOST_HOST_AFTER)
    _local.conn = (address, conn)
    return conn, False


def _drop_connection() -> None:
    cached = getattr(_local, "conn", None)
    _local.conn = None
    if cached is not None:
        cached[1].close()


def _request(path: str, payload: dict[str, Any], server: str, tool: str) -> dict[str, Any]:
    mark = _publish_mark()  # what the code printed before the call reaches the application first
    if mark is not None:
        payload = {**payload, "mark": mark}
    body = json.dumps(payload).encode()
    headers = {
        "Authorization": f"Bearer {os.environ.get(_TOKEN_ENV, '')}",
        "Content-Type": "application/json",
    }
    while True:
        conn, reused = _connection()
        try:
            _send(conn, path, body, headers)
            response = conn.getresponse()
            status = response.status
            raw = _read_final_line(response)
            break
        except (ConnectionRefusedError, FileNotFoundError) as exc:
            _drop_connection()
            raise ToolServerUnavailable(f"the ipybox tool server is not reachable: {exc}") from None
        except TimeoutError:
            _drop_connection()
            raise ToolServerUnavailable(
                f"the ipybox tool server stopped answering (no heartbeat for {LOST_HOST_AFTER:.0f} s)"
            ) from None
        except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError) as exc:
            # A kept-alive connection may have been closed by the server while idle: retry on a
            # fresh one. On a fresh connection the failure means the host is gone.
            _drop_connection()
            if not reused:
                raise ToolServerUnavailable(f"lost the connection to the ipybox tool server: {exc}") from None
        except BaseException:
            # KeyboardInterrupt (timeout or cancel) mid-request: the connection is in an unknown
            # state, and closing it tells the server to abandon the call.
            _drop_connection()
            raise
    if status == 401:
        raise PermissionError("the ipybox tool server refused the call: invalid token")
    try:
        message = json.loads(raw)
    except ValueError:
        raise ToolServerUnavailable(f"unreadable answer from the tool server (HTTP {status})") from None
    if message.get("ok"):
        return dict(message.get("result") or {})
    error = message.get("error") or {}
    _raise(str(error.get("type", "")), str(error.get("message", "")), server, tool)


def _send(conn: http.client.HTTPConnection, path: str, body: bytes, headers: dict[str, str]) -> None:
    # The server may hang up before reading the whole request, having answered first (a body over
    # its size limit, too many connections): getresponse() then reads that answer, or fails like a
    # lost connection.
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        conn.request("POST", path, body=body, headers=headers)


def _flush_output() -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):  # a closed or replaced stream must not break the call
            stream.flush()


def _publish_mark() -> str | None:
    """Flush stdout/stderr, then publish an output mark on the kernel's iopub channel (after the
    flushed text: ipykernel sends both from one thread, in order). Returns its id, or None outside
    an IPython kernel."""
    _flush_output()
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    kernel = getattr(shell, "kernel", None)
    if kernel is None:
        return None
    mark = os.urandom(8).hex()
    topic = getattr(kernel, "_topic", None)
    try:
        kernel.session.send(
            kernel.iopub_socket,
            OUTPUT_MARK_MSG,
            {"mark": mark},
            parent=getattr(shell, "parent_header", None),
            ident=topic(OUTPUT_MARK_MSG) if callable(topic) else None,
        )
    except Exception:  # an unusual kernel: the request then goes out unmarked
        return None
    return mark


def _read_final_line(response: http.client.HTTPResponse) -> bytes:
    while True:
        line = response.readline()
        if not line:
            raise http.client.RemoteDisconnected("the tool server closed the connection mid-answer")
        if line.strip():
            response.read()  # drain to keep the connection reusable
            return line


def _raise(kind: str, message: str, server: str, tool: str) -> NoReturn:
    if kind in ("rejected", "approval_timeout"):
        raise PermissionError(message)
    if kind == "tool_error":
        raise ToolError(message, server=server, tool=tool)
    if kind == "timeout":
        raise ToolTimeoutError(message)
    if kind == "server_error":
        raise McpServerError(message)
    if kind == "unknown_tool":
        raise LookupError(message)
    if kind == "bad_request":
        raise ValueError(message)
    if kind == "unavailable":
        raise ToolServerUnavailable(message)
    raise RuntimeError(message or f"tool server error ({kind})")
