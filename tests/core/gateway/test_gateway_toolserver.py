"""The tool server as gateway kernels reach it: over TCP."""

from __future__ import annotations

import asyncio
import socket

import pytest

from ipybox_core.approval import ApprovalGate
from ipybox_core.mcp import McpRegistry
from ipybox_core.toolserver import ToolServer


@pytest.mark.xfail(
    strict=True,
    reason="bug in ToolServer.start_tcp: its listening socket is created with proto 0, so asyncio "
    "does not set TCP_NODELAY on accepted connections and every tool call a gateway kernel makes "
    "waits for Nagle + delayed ACK (measured: 44 ms per call; 4.6 ms with IPPROTO_TCP)",
)
async def test_tcp_connections_to_the_tool_server_disable_nagle() -> None:
    server = ToolServer(McpRegistry(), ApprovalGate("never"))
    await server.start_tcp("127.0.0.1", 0)
    writer: asyncio.StreamWriter | None = None
    try:
        port = int(server.address.rsplit(":", 1)[1])
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"GET /nothing HTTP/1.1\r\nHost: ipybox\r\n\r\n")
        await writer.drain()
        await reader.readuntil(b"\r\n\r\n")  # the connection is accepted and served
        assert server._server is not None
        connections = list(server._server.server_state.connections)
        assert len(connections) == 1
        accepted = connections[0].transport.get_extra_info("socket")
        assert accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
    finally:
        if writer is not None:
            writer.close()
        await server.aclose()
