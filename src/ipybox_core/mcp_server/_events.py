"""Resumable SSE responses over Streamable HTTP: each MCP session's events, kept in memory.

With an event store the MCP SDK's transport starts every SSE response with a priming event (an id,
no data, and ``retry:`` :data:`RETRY_MS`) and gives every event an id. A client whose stream broke
reconnects with ``GET`` and ``Last-Event-ID`` and gets the events it missed, then the rest of the
response (protocol 2025-11-25 and later; a 2026-07-28 request has no MCP session to resume).

Each MCP session has its own :class:`SessionEventStore`, which goes with the session: the SDK's
transport names a response's events after its request id, and request ids repeat across sessions,
so one store shared by all sessions (what ``streamable_http_app(event_store=...)`` does) could
replay one session's events into another. A store keeps at most :data:`MAX_EVENTS` events and
:data:`MAX_BYTES` of their JSON (the newest event always), dropping the oldest first; a client that
resumes from a dropped event gets an empty stream.
"""

from __future__ import annotations

import contextlib
import secrets
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, Final

from mcp.server import MCPServer
from mcp.server.streamable_http import EventCallback, EventId, EventMessage, EventStore, StreamId
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from mcp_types import JSONRPCMessage
from starlette.applications import Starlette
from starlette.routing import Route

MAX_EVENTS: Final = 1000
"""Events one MCP session keeps for resumption."""
MAX_BYTES: Final = 4 * 1024 * 1024
"""Bytes of JSON one MCP session keeps for resumption (the newest event is kept whatever its size)."""
RETRY_MS: Final = 1000
"""The ``retry:`` of the priming events: how long a client waits before it reconnects."""
MCP_PATH: Final = "/mcp"


@dataclass(frozen=True)
class _Event:
    id: EventId
    stream: StreamId
    message: JSONRPCMessage | None
    size: int


class SessionEventStore(EventStore):
    """The events of one MCP session, bounded by ``max_events`` and ``max_bytes``."""

    def __init__(self, *, max_events: int = MAX_EVENTS, max_bytes: int = MAX_BYTES) -> None:
        self.max_events = max_events
        self.max_bytes = max_bytes
        self._prefix = secrets.token_hex(8)  # an id of another session's store matches none of these
        self._count = 0
        self._events: deque[_Event] = deque()
        self._by_id: dict[EventId, _Event] = {}
        self._bytes = 0

    @property
    def count(self) -> int:
        """Events kept (not ``__len__``: the SDK tests a store for truth, and an empty one must pass)."""
        return len(self._events)

    @property
    def size(self) -> int:
        """Bytes of JSON kept."""
        return self._bytes

    async def store_event(self, stream_id: StreamId, message: JSONRPCMessage | None) -> EventId:
        self._count += 1
        size = 0 if message is None else len(message.model_dump_json(by_alias=True, exclude_unset=True))
        event = _Event(f"{self._prefix}-{self._count}", stream_id, message, size)
        self._events.append(event)
        self._by_id[event.id] = event
        self._bytes += size
        while len(self._events) > 1 and (len(self._events) > self.max_events or self._bytes > self.max_bytes):
            dropped = self._events.popleft()
            del self._by_id[dropped.id]
            self._bytes -= dropped.size
        return event.id

    async def replay_events_after(
        self, last_event_id: EventId, send_callback: EventCallback
    ) -> StreamId | None:
        last = self._by_id.get(last_event_id)
        if last is None:
            return None
        later = [
            event
            for event in list(self._events)
            if event.stream == last.stream and event.message is not None and _after(event.id, last.id)
        ]
        for event in later:
            assert event.message is not None
            await send_callback(EventMessage(event.message, event.id))
        return last.stream


def _after(event_id: EventId, last_id: EventId) -> bool:
    return int(event_id.rsplit("-", 1)[1]) > int(last_id.rsplit("-", 1)[1])


class _PerSessionEvents(StreamableHTTPSessionManager):
    """A session manager that gives each new MCP session its own :class:`SessionEventStore`.

    The SDK's manager reads ``self.event_store`` once for each transport (session) it creates.
    """

    @property
    def event_store(self) -> EventStore | None:
        return SessionEventStore()

    @event_store.setter
    def event_store(self, value: EventStore | None) -> None:
        pass  # the base class sets it; each session gets a fresh store instead


def resumable_http_app(
    server: MCPServer[Any], *, host: str, transport_security: TransportSecuritySettings | None = None
) -> Starlette:
    """``server.streamable_http_app(host=host, transport_security=...)`` with resumable SSE
    responses (a :class:`SessionEventStore` per MCP session, priming events with ``retry:``)."""
    if transport_security is None and host in ("127.0.0.1", "localhost", "::1"):
        transport_security = TransportSecuritySettings(  # the SDK's default on loopback
            enable_dns_rebinding_protection=True,
            allowed_hosts=["127.0.0.1:*", "localhost:*", "[::1]:*"],
            allowed_origins=["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"],
        )
    manager = _PerSessionEvents(
        server._lowlevel_server, retry_interval=RETRY_MS, security_settings=transport_security
    )

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with manager.run():
            yield

    return Starlette(routes=[Route(MCP_PATH, endpoint=StreamableHTTPASGIApp(manager))], lifespan=lifespan)
