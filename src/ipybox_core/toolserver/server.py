"""The tool server: HTTP on a unix socket (or TCP) inside the application process."""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import cast

import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

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


class _BoundedH11(H11Protocol):
    """uvicorn's HTTP/1.1 protocol with a cap on open connections and an idle timeout.

    A connection beyond ``max_connections`` is answered with a one-line error and closed at once,
    so a flood costs the application no lasting file descriptor. A connection that has no request
    being handled is closed ``idle_timeout`` seconds after it opened or answered its last request;
    bytes that trickle in without completing a request do not extend that.
    """

    max_connections = MAX_CONNECTIONS
    idle_timeout = IDLE_TIMEOUT
    _refused = False
    _idle: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        if len(self.connections) >= self.max_connections:
            self._refused = True
            self.transport = cast(asyncio.Transport, transport)
            self.transport.write(_refusal(self.max_connections))
            self.transport.close()
            return
        super().connection_made(transport)  # type: ignore[arg-type]
        self._arm_idle_timer()

    def data_received(self, data: bytes) -> None:
        if not self._refused:
            super().data_received(data)

    def connection_lost(self, exc: Exception | None) -> None:
        if self._idle is not None:
            self._idle.cancel()
            self._idle = None
        if not self._refused:
            super().connection_lost(exc)

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self._arm_idle_timer()

    def _arm_idle_timer(self) -> None:
        if self._idle is not None:
            self._idle.cancel()
        self._idle = self.loop.call_later(self.idle_timeout, self._idle_expired)

    def _idle_expired(self) -> None:
        self._idle = None
        if self.cycle is not None and not self.cycle.response_complete:
            return  # a request is being handled (or its body read, under the body timeout)
        self.transport.close()


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


def _protocol_class(max_connections: int, idle_timeout: float) -> type[H11Protocol]:
    """A :class:`_BoundedH11` with this server's limits (each server counts its own connections)."""

    class Bounded(_BoundedH11):
        pass

    Bounded.max_connections = max_connections
    Bounded.idle_timeout = idle_timeout
    return Bounded


class _QuietServer(uvicorn.Server):
    """uvicorn without its signal handlers: Ctrl-C belongs to the application, not to us."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


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
        self._protocol = _protocol_class(max_connections, idle_timeout)
        self._idle_timeout = idle_timeout
        self._backlog = max(8, min(max_connections, 128))
        self._server: _QuietServer | None = None
        self._task: asyncio.Task[None] | None = None
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
        if self._server is not None:
            sock.close()
            raise RuntimeError("the tool server is already running")
        # asyncio accepts up to ``backlog`` connections per wake-up (and listens again with it):
        # keeping it near the connection limit bounds the descriptors a flood holds even briefly.
        sock.listen(self._backlog)
        sock.setblocking(False)
        config = uvicorn.Config(
            self._app,
            http=self._protocol,
            log_level="warning",
            access_log=False,
            lifespan="off",
            timeout_keep_alive=max(1, round(self._idle_timeout)),
            timeout_graceful_shutdown=1,
            backlog=self._backlog,
            ssl_certfile=certfile or None,
            ssl_keyfile=keyfile,
        )
        server = _QuietServer(config)
        self._server = server
        self._task = asyncio.create_task(server.serve(sockets=[sock]), name="ipybox-toolserver")
        while not server.started:
            if self._task.done():
                self._task.result()
                raise RuntimeError("the tool server stopped while starting")
            await asyncio.sleep(0.002)
        self._address = address

    async def aclose(self) -> None:
        """Stop serving; calls still waiting are cancelled (their approvals abandoned)."""
        server, task = self._server, self._task
        self._server = self._task = None
        self._address = None
        if server is None or task is None:
            return
        server.should_exit = True
        server.force_exit = True
        for connection in list(server.server_state.connections):
            connection.shutdown()
        for pending in list(server.server_state.tasks):
            pending.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        if self._socket_path is not None:
            with contextlib.suppress(FileNotFoundError):
                self._socket_path.unlink()
