"""An ASGI app served on a listening socket under :class:`ListenerLimits`, straight from asyncio.

uvicorn's HTTP/1.1 protocol does the HTTP; ``uvicorn.Server`` is not used, because it cannot
bound the TLS handshake (asyncio's default lets a connection handshake for 60 s) and because it
logs on the process-wide ``uvicorn.error`` logger ("Started server process", "Shutting down"),
which belongs to the application when ipybox runs inside one.
"""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import uvicorn
from starlette.types import ASGIApp
from uvicorn.server import ServerState

from ipybox_core._http_limits import ListenerLimits, bounded_h11


class HttpListener:
    """Serves ``app`` on a socket the caller bound; :meth:`start`, then :meth:`stop`.

    ``refusal`` is the response to a connection beyond ``limits.max_connections``. With
    ``log_name`` the protocol logs there instead of on uvicorn's loggers, and no access log is
    written. ``lifespan`` runs the app's lifespan (startup before serving, shutdown after). The TLS
    handshake (``certfile``/``keyfile``) must finish within ``limits.header_timeout``.

    ``config`` holds further ``uvicorn.Config`` options; uvicorn's logging is configured only if
    it names ``log_config`` or ``log_level``.
    """

    def __init__(
        self,
        app: ASGIApp,
        limits: ListenerLimits,
        *,
        refusal: bytes,
        log_name: str | None = None,
        lifespan: bool = False,
        certfile: str | None = None,
        keyfile: str | None = None,
        **config: Any,
    ) -> None:
        self.limits = limits
        self.state = ServerState()
        protocol = bounded_h11(limits, refusal=refusal, log_name=log_name)
        self._config = uvicorn.Config(
            app,
            http=protocol,
            ws="none",
            lifespan="on" if lifespan else "off",
            backlog=limits.backlog,
            ssl_certfile=certfile or None,
            ssl_keyfile=keyfile,
            **{"log_config": None, "log_level": None, **config},
        )
        self._lifespan: Any = None
        self._server: asyncio.Server | None = None

    async def start(self, sock: socket.socket) -> None:
        """Run the lifespan's startup, then accept connections on ``sock`` (closed by :meth:`stop`).

        Raises:
            RuntimeError: the app's lifespan startup failed (uvicorn has logged why).
        """
        config = self._config
        try:
            if not config.loaded:
                config.load()
            self._lifespan = config.lifespan_class(config)
            await self._lifespan.startup()
            if self._lifespan.should_exit:
                raise RuntimeError("the HTTP application failed to start")
        except BaseException:
            sock.close()
            raise
        self.state.default_headers = list(config.encoded_headers)
        loop = asyncio.get_running_loop()
        state, app_state, protocol = self.state, self._lifespan.state, config.http_protocol_class

        def connection() -> asyncio.Protocol:
            return protocol(config=config, server_state=state, app_state=app_state, _loop=loop)  # type: ignore[call-arg]

        sock.setblocking(False)
        try:
            self._server = await loop.create_server(
                connection,
                sock=sock,
                ssl=config.ssl,
                backlog=self.limits.backlog,
                ssl_handshake_timeout=self.limits.header_timeout if config.ssl else None,
            )
        except BaseException:
            sock.close()
            raise

    async def stop(self, grace: float = 0.0) -> None:
        """Stop accepting, close idle connections, give requests being handled ``grace`` seconds,
        cancel the rest, then run the lifespan's shutdown."""
        server, self._server = self._server, None
        if server is None:
            return
        server.close()
        for connection in list(self.state.connections):
            connection.shutdown()
        if grace > 0 and self.state.tasks:
            await asyncio.wait(list(self.state.tasks), timeout=grace)
        pending = list(self.state.tasks)
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        if self._lifespan is not None:
            await self._lifespan.shutdown()
