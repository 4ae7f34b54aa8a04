"""The tool server: HTTP on a unix socket (or TCP) inside the application process."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import socket
from pathlib import Path

from ipybox_core._http_limits import ListenerLimits, RepeatFilter
from ipybox_core._http_listener import HttpListener
from ipybox_core.approval import ApprovalGate
from ipybox_core.toolserver._app import ToolBackend, build_app, error_line

HEARTBEAT_SECONDS = 5.0
"""Interval of the keep-alive lines sent while a call waits (see ``runtime.LOST_HOST_AFTER``)."""

MAX_REQUEST_BYTES = 4 * 1024 * 1024
"""Default largest request body (a tool call's JSON) the server reads; larger ones are refused."""

MAX_CONNECTIONS = 64
"""Default number of connections one tool server (one kernel) may hold open at once."""

IDLE_TIMEOUT = 60.0
"""Default seconds a connection may stay open without a request being handled (and the time a
client has to send a request body); the kernel's runtime reconnects transparently."""

LOGGER_NAME = "ipybox.toolserver"
"""The tool servers' logger: they leave uvicorn's loggers (the application's, maybe) alone."""


def _not_cancelled(record: logging.LogRecord) -> bool:
    """Calls cancelled by :meth:`ToolServer.aclose` are not errors of the application."""
    return not (record.exc_info and isinstance(record.exc_info[1], asyncio.CancelledError))


logging.getLogger(LOGGER_NAME).addFilter(_not_cancelled)
logging.getLogger(LOGGER_NAME).addFilter(RepeatFilter())


def _refusal(limit: int) -> bytes:
    line = error_line(
        "unavailable",
        f"too many connections to the ipybox tool server: it accepts at most {limit} at once from "
        "this kernel (max_connections); close idle ones (e.g. finish threads that called tools)",
    )
    head = (
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/x-ndjson\r\n"
        f"content-length: {len(line)}\r\nconnection: close\r\n\r\n"
    )
    return head.encode() + line


class ToolServer:
    """Serves ``/call`` and ``/shell`` for one executor's kernel, with a random per-server token.

    Every request must carry the token; every call passes the :class:`ApprovalGate` before it
    reaches the backend. Start it with :meth:`start_unix` (the default, local kernels) or
    :meth:`start_tcp` (kernels on other machines; optionally TLS).

    What the kernel can cost the application is bounded: a request body over ``max_request_bytes``
    is refused without being read, JSON nested deeper than 400 levels is refused, at most
    ``max_connections`` connections are held open at once (more are answered with an error and
    closed), and a connection without a request being handled is closed after ``idle_timeout``
    seconds (also the time allowed to send a request body).
    """

    def __init__(
        self,
        backend: ToolBackend,
        gate: ApprovalGate,
        *,
        heartbeat: float = HEARTBEAT_SECONDS,
        max_request_bytes: int = MAX_REQUEST_BYTES,
        max_connections: int = MAX_CONNECTIONS,
        idle_timeout: float = IDLE_TIMEOUT,
    ) -> None:
        if max_request_bytes < 1 or max_connections < 1 or idle_timeout <= 0:
            raise ValueError("max_request_bytes, max_connections and idle_timeout must be positive")
        self.token = secrets.token_urlsafe(32)
        self._app = build_app(
            backend,
            gate,
            self.token,
            heartbeat,
            max_request_bytes=max_request_bytes,
            body_timeout=idle_timeout,
        )
        self._limits = ListenerLimits(max_connections, header_timeout=idle_timeout)
        self._listener: HttpListener | None = None
        self._address: str | None = None
        self._socket_path: Path | None = None

    @property
    def address(self) -> str:
        """``unix:/path/tools.sock`` or ``http(s)://host:port``, as the kernel's runtime expects it."""
        if self._address is None:
            raise RuntimeError("the tool server is not running")
        return self._address

    async def start_unix(self, path: Path) -> None:
        """Listen on the unix socket ``path`` (created with mode 0600)."""
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        sock.bind(str(path))
        path.chmod(0o600)
        self._socket_path = path
        await self._serve(sock, f"unix:{path}")

    async def start_tcp(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        advertise_host: str | None = None,
        certfile: str | None = None,
        keyfile: str | None = None,
    ) -> None:
        """Listen on TCP; ``advertise_host`` is the name the kernel uses to reach this machine."""
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        # IPPROTO_TCP, not 0: asyncio sets TCP_NODELAY on accepted connections only for TCP sockets
        # it recognises as such; with Nagle on, every call waits ~40 ms for a delayed ACK.
        sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        scheme = "https" if certfile else "http"
        name = advertise_host or host
        if ":" in name:
            name = f"[{name}]"
        await self._serve(
            sock, f"{scheme}://{name}:{sock.getsockname()[1]}", certfile=certfile, keyfile=keyfile
        )

    async def _serve(
        self, sock: socket.socket, address: str, *, certfile: str | None = None, keyfile: str | None = None
    ) -> None:
        if self._listener is not None:
            sock.close()
            raise RuntimeError("the tool server is already running")
        listener = HttpListener(
            self._app,
            self._limits,
            refusal=_refusal(self._limits.max_connections),
            log_name=LOGGER_NAME,
            certfile=certfile,
            keyfile=keyfile,
            timeout_keep_alive=max(1, round(self._limits.header_timeout)),
        )
        await listener.start(sock)
        self._listener = listener
        self._address = address

    async def aclose(self) -> None:
        """Stop serving; calls still waiting are cancelled (their approvals abandoned)."""
        listener, self._listener = self._listener, None
        self._address = None
        if listener is None:
            return
        await listener.stop()
        if self._socket_path is not None:
            with contextlib.suppress(FileNotFoundError):
                self._socket_path.unlink()
