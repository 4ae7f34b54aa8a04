"""The MCP SDK internals the ipybox MCP server relies on, each used in one place.

- ``MCPServer._lowlevel_server.add_request_handler``: ``logging/setLevel`` is registered there
  (``_client_log.add_set_level``; MCPServer has no public hook), and a registered handler makes
  the server announce the logging capability.
- ``ServerSession._connection.state``: where a client session's log level is kept
  (``_client_log``); the SDK builds a ``ServerSession`` per request, its ``Connection`` lives as
  long as the client session.
- ``StreamableHTTPSessionManager`` reads its ``event_store`` once for each session it opens:
  ``_events`` makes it a property that hands each session its own store (the isolation itself is
  tested end to end in ``test_mcp_server_resumable_sse``).

If an SDK release changes them, these tests fail naming what changed (pyproject.toml bounds mcp
below 3).
"""

from __future__ import annotations

from typing import Any

import httpx
from mcp import Client
from mcp.server import MCPServer
from mcp.server.lowlevel.server import NotificationOptions
from mcp.server.mcpserver import Context
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp_server_kit import INITIALIZE_2025_11
from mcp_types import EmptyResult, SetLevelRequestParams, TextContent

from ipybox_core.mcp_server import _events


def test_a_set_level_handler_on_the_low_level_server_announces_logging() -> None:
    low = MCPServer("probe")._lowlevel_server
    assert low.get_capabilities(NotificationOptions(), {}).logging is None

    async def handler(ctx: Any, params: SetLevelRequestParams) -> EmptyResult:
        return EmptyResult()

    low.add_request_handler("logging/setLevel", SetLevelRequestParams, handler)
    assert low.get_capabilities(NotificationOptions(), {}).logging is not None


async def test_a_requests_session_reaches_state_kept_per_client_session() -> None:
    server: MCPServer[Any] = MCPServer("probe")

    @server.tool()
    async def count(ctx: Context[Any, Any]) -> str:
        state = ctx.request_context.session._connection.state
        state["n"] = state.get("n", 0) + 1
        return str(state["n"])

    async def counts(client: Client) -> list[str]:
        results = [await client.call_tool("count", {}) for _ in range(2)]
        return [
            block.text for result in results for block in result.content if isinstance(block, TextContent)
        ]

    async with Client(server, mode="legacy") as first:
        assert await counts(first) == ["1", "2"]  # kept between requests
    async with Client(server, mode="legacy") as second:
        assert await counts(second) == ["1", "2"]  # not shared with another client session


async def test_the_session_manager_reads_its_event_store_once_per_new_session() -> None:
    reads: list[object] = []

    class Counting(_events._PerSessionEvents):
        @property
        def event_store(self) -> Any:
            reads.append(store := super().event_store)
            return store

        @event_store.setter
        def event_store(self, value: Any) -> None:
            pass

    assert issubclass(_events._PerSessionEvents, StreamableHTTPSessionManager)
    manager = Counting(MCPServer("probe")._lowlevel_server)
    headers = {"Accept": "application/json, text/event-stream"}
    async with manager.run():
        transport = httpx.ASGITransport(app=manager.handle_request)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8000") as client:
            for _ in range(2):
                assert (
                    await client.post("/mcp", json=INITIALIZE_2025_11, headers=headers)
                ).status_code == 200
    assert len(reads) == 2 and reads[0] is not reads[1]
