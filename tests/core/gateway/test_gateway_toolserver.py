"""The tool server as gateway kernels reach it: over TCP."""

from __future__ import annotations

import asyncio
import socket

from ipybox_core.approval import ApprovalGate
from ipybox_core.mcp import McpRegistry
from ipybox_core.toolserver import ToolServer


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
        assert server._listener is not None
        connections = list(server._listener.state.connections)
        assert len(connections) == 1
        accepted = connections[0].transport.get_extra_info("socket")
        assert accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
    finally:
        if writer is not None:
            writer.close()
        await server.aclose()
