"""The authorization step on one machine: open the URL in a browser, catch the redirect on loopback.

:func:`browser_authorize` is a ready-made ``authorize`` callback (``ipybox run`` uses it): it
listens on the redirect URI's loopback address first, then shows the authorization URL (and opens
it in the default browser), and answers with the URL the browser is sent back to.
"""

from __future__ import annotations

import asyncio
import contextlib
import webbrowser
from collections.abc import Callable
from urllib.parse import urlsplit

from mcp.client.auth import OAuthFlowError

from ipybox_core.mcp.oauth import AuthorizationRequest, Authorize

LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1", "[::1]"})
_PAGE = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\nConnection: close\r\n\r\n"
    b"<!doctype html><title>ipybox</title><p>Authorization received: you can close this tab.</p>"
)
_NOT_FOUND = b"HTTP/1.1 404 Not Found\r\nConnection: close\r\n\r\n"


class LoopbackRedirect:
    """A one-shot HTTP listener on a loopback ``redirect_uri``; :meth:`wait` returns the URL it received."""

    def __init__(self, redirect_uri: str) -> None:
        parts = urlsplit(redirect_uri)
        host = parts.hostname or ""
        if parts.scheme != "http" or host not in LOOPBACK_HOSTS or parts.port is None:
            raise OAuthFlowError(
                f"redirect_uri {redirect_uri!r} is not an http://127.0.0.1:PORT/... loopback address, "
                "so this machine cannot receive the redirect; set such a redirect_uri in the server's "
                '"auth" config, or answer the authorization in the application'
            )
        self.redirect_uri = redirect_uri
        self._host, self._port, self._path = host.strip("[]"), parts.port, parts.path or "/"
        self._received: asyncio.Future[str] | None = None
        self._server: asyncio.Server | None = None

    async def __aenter__(self) -> LoopbackRedirect:
        self._received = asyncio.get_running_loop().create_future()
        try:
            self._server = await asyncio.start_server(self._serve, self._host, self._port)
        except OSError as exc:
            raise OAuthFlowError(
                f"cannot listen on {self.redirect_uri} for the authorization redirect "
                f'({exc.strerror or exc}); set "redirect_uri" in the server\'s "auth" config to a free '
                "loopback port"
            ) from None
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await self._server.wait_closed()

    async def wait(self) -> str:
        """The full redirect URL (with ``code`` and ``state``) of the first request to the redirect path."""
        assert self._received is not None, "use `async with LoopbackRedirect(...)`"
        return await self._received

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            request_line = (await reader.readline()).decode("latin-1").split()
            while (await reader.readline()).strip():
                pass  # headers
            target = request_line[1] if len(request_line) >= 2 and request_line[0] == "GET" else ""
            if urlsplit(target).path != self._path or self._received is None or self._received.done():
                writer.write(_NOT_FOUND)
                return
            writer.write(_PAGE)
            base = urlsplit(self.redirect_uri)
            self._received.set_result(f"{base.scheme}://{base.netloc}{target}")
        except (OSError, UnicodeError):
            return
        finally:
            with contextlib.suppress(OSError):
                await writer.drain()
                writer.close()


def browser_authorize(*, show: Callable[[str], None] = print, open_browser: bool = True) -> Authorize:
    """An ``authorize`` callback for an application on the user's own machine.

    ``show`` gets one line with the server's name and the URL to open (the browser may not open on
    a remote shell); the answer is the redirect the loopback listener receives.
    """

    async def authorize(request: AuthorizationRequest) -> str:
        async with LoopbackRedirect(request.redirect_uri) as listener:
            show(f"MCP server {request.server!r} needs your authorization: open {request.url}")
            if open_browser:
                with contextlib.suppress(Exception):
                    await asyncio.to_thread(webbrowser.open, request.url)
            return await listener.wait()

    return authorize
