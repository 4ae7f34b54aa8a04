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
import json
import os
import socket
import ssl
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
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
    """The tool's structured content (``structuredContent``), whether or not it has an output schema."""
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
    """What a tool without an output schema returns: its text, with everything else it sent.

    It *is* the text (a ``str``), so code that treats the result as text keeps working. The
    server's structured data (``structuredContent``, e.g. an id the next call needs) is in
    :attr:`structured` (``None`` when it sent none), every content block in :attr:`content` and
    the images in :attr:`images`. Displaying it in the kernel (last expression of a cell, or
    ``display(result)``) shows the images.
    """

    content: list[dict[str, Any]]
    structured: Any

    def __new__(
        cls, text: str, content: list[dict[str, Any]] | None = None, structured: Any = None
    ) -> ToolResult:
        self = super().__new__(cls, text)
        self.content = [] if content is None else content
        self.structured = structured
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


def result_text(response: ToolResponse) -> ToolResult:
    """The value a tool without an output schema returns: a :class:`ToolResult` (a ``str``)."""
    return ToolResult(response.text, response.content, response.structured)


def call_tool(server: str, tool: str, arguments: dict[str, Any]) -> ToolResponse:
    """Call ``tool`` on the MCP server registered as ``server``; blocks until approved and answered.

    Raises :class:`PermissionError` when the application rejects the call, :class:`ToolError` when
    the tool fails, :class:`ToolTimeoutError` on a timeout and :class:`ToolServerUnavailable` when
    the host cannot be reached.
    """
    result = _request("/call", {"server": server, "tool": tool, "arguments": arguments}, server, tool)
    for notice in result.get("notices") or ():  # e.g. the server was restarted and lost its state
        sys.stderr.write(f"ipybox: {notice}\n")
    return ToolResponse(structured=result.get("structured"), content=list(result.get("content") or []))


def approve_shell_command(command: str) -> None:
    """Ask the application to approve a shell command; raises :class:`PermissionError` if rejected."""
    _request("/shell", {"command": command}, "", "")


# --- transport ----------------------------------------------------------------------------------
#
# A minimal HTTP/1.1 client on a plain (or TLS) socket: one ``sendall`` per request, the answer
# read from the socket's buffered reader. The tool server is the only peer, so only what it sends
# is understood: a status line, headers, then a ``Content-Length`` body (an answer ready at once) or
# a chunked one (heartbeat lines while the call waits, then the answer line).

_MAX_LINE = 65536
_MAX_HEADERS = 100


class _Lost(Exception):
    """The connection ended before a complete answer."""


class _Connection:
    """One keep-alive connection to the tool server, used by one thread at a time."""

    __slots__ = ("address", "host", "reader", "sock", "timeout")

    def __init__(self, address: str, sock: socket.socket, host: str) -> None:
        self.address = address
        self.sock = sock
        self.host = host
        self.reader = sock.makefile("rb")
        self.timeout = sock.gettimeout()

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.reader.close()
        with contextlib.suppress(OSError):
            self.sock.close()

    def exchange(
        self, path: str, body: bytes, token: str, while_waiting: Callable[[], None] | None = None
    ) -> tuple[int, bytes]:
        """Send one request, run ``while_waiting`` (if given), then read the answer: the status and
        the first non-empty line of its body."""
        if self.timeout != LOST_HOST_AFTER:  # changed since the connection opened (tests do)
            self.sock.settimeout(LOST_HOST_AFTER)
            self.timeout = LOST_HOST_AFTER
        head = (
            f"POST {path} HTTP/1.1\r\nHost: {self.host}\r\nAuthorization: Bearer {token}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        )
        # The server may hang up before reading the whole request, having answered first (a body
        # over its size limit, too many connections): the answer is read all the same.
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            self.sock.sendall(head.encode() + body)
        if while_waiting is not None:
            while_waiting()
        try:
            return self._answer()
        except ValueError as exc:  # a malformed length or chunk size
            raise _Lost(f"unreadable answer from the tool server: {exc}") from None

    def _line(self) -> bytes:
        line = self.reader.readline(_MAX_LINE + 1)
        if not line:
            raise _Lost("the tool server closed the connection")
        if len(line) > _MAX_LINE:
            raise _Lost("the tool server sent an overlong line")
        return line

    def _answer(self) -> tuple[int, bytes]:
        status_line = self._line()
        parts = status_line.split(None, 2)
        if len(parts) < 2 or not parts[0].startswith(b"HTTP/") or not parts[1].isdigit():
            raise _Lost(f"not an HTTP answer: {status_line[:80]!r}")
        status = int(parts[1])
        keep = parts[0] == b"HTTP/1.1"
        length: int | None = None
        chunked = False
        for _ in range(_MAX_HEADERS + 1):
            line = self._line()
            if line in (b"\r\n", b"\n"):
                break
            name, _, value = line.partition(b":")
            name = name.strip().lower()
            if name == b"content-length":
                length = int(value.strip())
            elif name == b"transfer-encoding":
                chunked = b"chunked" in value.lower()
            elif name == b"connection":
                keep = b"close" not in value.lower()
        else:
            raise _Lost("the tool server sent too many headers")
        if chunked:
            body = self._chunks()
        elif length is not None:
            body = self.reader.read(length)
            if len(body) < length:
                raise _Lost("the tool server closed the connection mid-answer")
        else:
            body, keep = self.reader.read(), False
        if not keep:
            _drop_connection()
        for line in body.split(b"\n"):
            if line.strip():
                return status, line
        raise _Lost("the tool server closed the connection mid-answer")

    def _chunks(self) -> bytes:
        """A chunked body, read to its end (the connection stays usable)."""
        data: list[bytes] = []
        while True:
            size = int(self._line().split(b";", 1)[0].strip(), 16)
            if size == 0:
                while self._line() not in (b"\r\n", b"\n"):  # trailers
                    pass
                return b"".join(data)
            chunk = self.reader.read(size)
            if len(chunk) < size:
                raise _Lost("the tool server closed the connection mid-answer")
            data.append(chunk)
            self._line()  # the chunk's CRLF


_local = threading.local()


def _connection() -> tuple[_Connection, bool]:
    """A keep-alive connection per thread (tools may be called from several threads at once).

    Returns the connection and whether it was reused from an earlier call.
    """
    address = os.environ.get(_SERVER_ENV)
    if not address:
        raise ToolServerUnavailable(
            f"{_SERVER_ENV} is not set: this kernel was not started by an ipybox executor"
        )
    cached: _Connection | None = getattr(_local, "conn", None)
    if cached is not None:
        if cached.address == address:
            return cached, True
        _drop_connection()
    conn = _open(address)
    _local.conn = conn
    return conn, False


def _open(address: str) -> _Connection:
    if address.startswith("unix:"):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.settimeout(LOST_HOST_AFTER)
            sock.connect(address[len("unix:") :])
        except BaseException:
            sock.close()
            raise
        return _Connection(address, sock, "ipybox")
    parts = urlsplit(address)
    host, port = parts.hostname or "", parts.port or (443 if parts.scheme == "https" else 80)
    sock = socket.create_connection((host, port), timeout=LOST_HOST_AFTER)
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # no 40 ms delayed-ACK waits
        if parts.scheme == "https":
            context = ssl.create_default_context(cafile=os.environ.get("IPYBOX_TOOL_CA") or None)
            sock = context.wrap_socket(sock, server_hostname=host)
    except BaseException:
        sock.close()
        raise
    return _Connection(address, sock, f"[{host}]:{port}" if ":" in host else f"{host}:{port}")


def _drop_connection() -> None:
    cached: _Connection | None = getattr(_local, "conn", None)
    _local.conn = None
    if cached is not None:
        cached.close()


PREPARE_BUDGET = 0.005
"""Seconds of :func:`prepare_while_waiting` work run after sending a request (the rest waits for the next)."""

_pending: deque[Callable[[], object]] = deque(maxlen=1024)  # under a policy that never asks: bounded


def prepare_while_waiting(work: Callable[[], object]) -> None:
    """Run ``work`` (e.g. building a generated tool's pydantic models, deferred so that importing a
    package stays cheap) while a call waits for the application's decision: after a request that
    may be held for approval is sent (one carrying an output mark), within :data:`PREPARE_BUDGET`
    seconds per request. A call held for a human then finds the next call's models built, instead
    of building them between the human's answer and the next request. Nothing runs while the
    policy cannot ask (requests without marks); ``work`` runs at most once, errors are ignored, and
    of more than 1024 waiting the oldest are dropped."""
    _pending.append(work)


def _prepare_pending() -> None:
    deadline = time.monotonic() + PREPARE_BUDGET
    while _pending and time.monotonic() < deadline:
        try:
            work = _pending.popleft()
        except IndexError:  # another thread took the last one
            return
        with contextlib.suppress(Exception):
            work()


_marks_wanted = True
"""Whether requests carry an output mark. Every successful answer says whether the tool server's
policy can ask the application at all (``"marks": false`` when it cannot); while it cannot, no mark
is published and requests say ``"unmarked": true``. Should the policy change, the server refuses
such a request (``mark_needed``) before deciding it, and it is sent again with a mark."""


def _request(path: str, payload: dict[str, Any], server: str, tool: str) -> dict[str, Any]:
    global _marks_wanted
    while True:
        wanted = _marks_wanted
        # What the code printed before the call reaches the application first.
        mark = _publish_mark() if wanted else None
        if mark is not None:
            sent = {**payload, "mark": mark}
        else:
            sent = payload if wanted else {**payload, "unmarked": True}
        # A marked request may wait for a human: the kernel prepares what later calls need meanwhile.
        status, raw = _exchange(path, json.dumps(sent).encode(), _prepare_pending if mark else None)
        if status == 401:
            raise PermissionError("the ipybox tool server refused the call: invalid token")
        try:
            message = json.loads(raw)
        except ValueError:
            raise ToolServerUnavailable(f"unreadable answer from the tool server (HTTP {status})") from None
        if message.get("ok"):
            _marks_wanted = message.get("marks") is not False
            return dict(message.get("result") or {})
        error = message.get("error") or {}
        kind = str(error.get("type", ""))
        if kind == "mark_needed" and not wanted:
            _marks_wanted = True
            continue
        code = error.get("code")
        _raise(kind, str(error.get("message", "")), server, tool, code if isinstance(code, int) else None)


def _exchange(path: str, body: bytes, while_waiting: Callable[[], None] | None = None) -> tuple[int, bytes]:
    """One request on this thread's connection (a fresh one if a kept-alive one was closed)."""
    token = os.environ.get(_TOKEN_ENV, "")
    if not token.isascii() or "\r" in token or "\n" in token:
        token = ""  # not a token the server issued: refused as such
    while True:
        reused = False
        try:
            conn, reused = _connection()
            return conn.exchange(path, body, token, while_waiting)
        except (ConnectionRefusedError, FileNotFoundError) as exc:
            _drop_connection()
            raise ToolServerUnavailable(f"the ipybox tool server is not reachable: {exc}") from None
        except TimeoutError:
            _drop_connection()
            raise ToolServerUnavailable(
                f"the ipybox tool server stopped answering (no heartbeat for {LOST_HOST_AFTER:.0f} s)"
            ) from None
        except (_Lost, BrokenPipeError, ConnectionResetError) as exc:
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


def _raise(kind: str, message: str, server: str, tool: str, code: int | None = None) -> NoReturn:
    if kind in ("rejected", "approval_timeout"):
        raise PermissionError(message)
    if kind == "tool_error":
        raise ToolError(message, server=server, tool=tool, code=code)
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
