"""The tool server: HTTP on a unix socket (or TCP) inside the application process."""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import socket
import ssl
from collections.abc import Iterator
from pathlib import Path

import uvicorn

from ipybox_core.approval import ApprovalGate
from ipybox_core.toolserver._app import ToolBackend, build_app

HEARTBEAT_SECONDS = 5.0
"""Interval of the keep-alive lines sent while a call waits (see ``runtime.LOST_HOST_AFTER``)."""


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
    """

    def __init__(
        self, backend: ToolBackend, gate: ApprovalGate, *, heartbeat: float = HEARTBEAT_SECONDS
    ) -> None:
        self.token = secrets.token_urlsafe(32)
        self._app = build_app(backend, gate, self.token, heartbeat)
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
        await self._serve(sock, f"unix:{path}", ssl_context=None)

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
        context = None
        if certfile:
            context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            context.load_cert_chain(certfile, keyfile)
        scheme = "https" if context else "http"
        name = advertise_host or host
        if ":" in name:
            name = f"[{name}]"
        await self._serve(sock, f"{scheme}://{name}:{sock.getsockname()[1]}", ssl_context=context)

    async def _serve(self, sock: socket.socket, address: str, ssl_context: ssl.SSLContext | None) -> None:
        if self._server is not None:
            sock.close()
            raise RuntimeError("the tool server is already running")
        sock.listen(128)
        sock.setblocking(False)
        config = uvicorn.Config(
            self._app,
            log_level="warning",
            access_log=False,
            lifespan="off",
            timeout_keep_alive=300,
            timeout_graceful_shutdown=1,
        )
        server = _QuietServer(config)
        if ssl_context is not None:
            config.load()
            config.ssl = ssl_context
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
