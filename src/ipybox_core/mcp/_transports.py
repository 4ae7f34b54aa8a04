"""Opening the mcp SDK transport for a server config."""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, TextIO

import httpx2
import mcp.client.sse as sdk_sse
from mcp import StdioServerParameters, stdio_client
from mcp.client._transport import Transport, TransportStreams
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared._httpx_utils import sse_within_origin as _sdk_sse_within_origin

from ipybox_core._host_process import host_cwd, host_search_path
from ipybox_core.mcp.config import HttpServerConfig, McpServerConfig, SseServerConfig, StdioServerConfig

SSE_READ_TIMEOUT = 300.0
"""Seconds without any event (servers send keep-alive pings) before an SSE stream counts as dead."""


class _DropStdoutParseErrors(logging.Filter):
    """The SDK logs a traceback for every non-JSON stdout line; the connection reports the line."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("Failed to parse JSONRPC message")


logging.getLogger("mcp.client.stdio").addFilter(_DropStdoutParseErrors())

SSE_FRAMING_SLACK = 64 * 1024
"""Bytes an SSE event may have beyond ``max_result_bytes`` (its ``data:`` framing): the exact
limit is checked on the parsed message, the same on every transport."""

_sse_event_limit: ContextVar[int | None] = ContextVar("ipybox_sse_event_limit", default=1024 * 1024)


def _sse_within_origin(
    client: httpx2.AsyncClient, url: httpx2.URL | str, *, headers: dict[str, str] | None = None, **_: Any
) -> AbstractAsyncContextManager[httpx2.EventSource]:
    """The SDK's ``sse_within_origin`` with the event limit of the connection being opened (the
    SDK's ``sse_client`` does not expose it; outside ipybox's connections its 1 MiB default stays)."""
    return _sdk_sse_within_origin(client, url, headers=headers, max_event_size=_sse_event_limit.get())


sdk_sse.sse_within_origin = _sse_within_origin  # type: ignore[attr-defined,assignment]


def _event_limit(config: McpServerConfig) -> int:
    return config.max_result_bytes + SSE_FRAMING_SLACK


@dataclass(frozen=True)
class HttpAuth:
    """What an HTTP or SSE transport adds to its requests: OAuth, and a hook on every response."""

    auth: httpx2.Auth | None = None
    on_response: Callable[[httpx2.Response], Awaitable[None]] | None = None

    def hooks(self) -> dict[str, list[Callable[[httpx2.Response], Awaitable[None]]]]:
        return {"response": [self.on_response]} if self.on_response is not None else {}


def open_transport(
    config: McpServerConfig, *, errlog: TextIO | None, connect_timeout: float, http: HttpAuth | None = None
) -> Transport:
    """The transport for ``config``; a stdio server's stderr goes to ``errlog`` (a real file).

    A stdio server starts in its config's ``cwd``, else in ``/`` (never in ipybox's own working
    directory, which may be a sandbox's workspace), with a ``PATH`` free of relative and
    sandbox-writable directories unless its config's ``env`` sets one (see :mod:`ipybox_core._host_process`).
    """
    if isinstance(config, StdioServerConfig):
        if errlog is None:
            raise ValueError("a stdio server needs a stderr log file")
        params = StdioServerParameters(
            command=config.command,
            args=config.args,
            env={"PATH": host_search_path(), **config.env},
            cwd=host_cwd(config.cwd),
        )
        return stdio_client(params, errlog=errlog)
    if isinstance(config, SseServerConfig):
        return _sse(config, connect_timeout, http or HttpAuth())
    if isinstance(config, HttpServerConfig):
        return _streamable_http(config, connect_timeout, http or HttpAuth())
    raise TypeError(f"unsupported MCP server config {type(config).__name__}")


@asynccontextmanager
async def _streamable_http(
    config: HttpServerConfig, connect_timeout: float, extra: HttpAuth
) -> AsyncIterator[TransportStreams]:
    # No read timeout on the HTTP level: the call timeout bounds each request instead.
    timeout = httpx2.Timeout(connect_timeout, read=None)
    async with (
        httpx2.AsyncClient(
            headers=config.headers, timeout=timeout, auth=extra.auth, event_hooks=extra.hooks()
        ) as http,
        streamable_http_client(
            config.url, http_client=http, max_sse_event_size=_event_limit(config)
        ) as streams,
    ):
        yield streams


@asynccontextmanager
async def _sse(
    config: SseServerConfig, connect_timeout: float, extra: HttpAuth
) -> AsyncGenerator[TransportStreams]:
    def client_factory(
        headers: dict[str, str] | None = None,
        timeout: httpx2.Timeout | None = None,
        auth: httpx2.Auth | None = None,
    ) -> httpx2.AsyncClient:
        client = create_mcp_http_client(headers=headers, timeout=timeout, auth=auth)
        client.event_hooks = extra.hooks()
        return client

    async with AsyncExitStack() as stack:
        token = _sse_event_limit.set(_event_limit(config))
        try:  # the SDK opens its event source while entering, so the limit is needed only then
            streams = await stack.enter_async_context(
                sse_client(
                    config.url,
                    headers=config.headers or None,
                    timeout=connect_timeout,
                    sse_read_timeout=SSE_READ_TIMEOUT,
                    httpx_client_factory=client_factory,
                    auth=extra.auth,
                )
            )
        finally:
            _sse_event_limit.reset(token)
        yield streams
