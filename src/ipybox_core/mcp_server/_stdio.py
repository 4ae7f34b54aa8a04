"""Serving MCP over stdio so that SIGTERM stops the server at once.

The SDK's ``stdio_server`` reads stdin in a worker thread; cancelling it waits until the client
sends another line or closes stdin, so a SIGTERM would leave the server (and its kernel) running.
Here stdin is read through the event loop instead (when it is a pipe, socket or terminal, as it is
under every MCP client), which cancellation interrupts immediately.
"""

from __future__ import annotations

import asyncio
import os
import stat
from collections.abc import AsyncIterator
from typing import Any, cast

import anyio
from mcp.server import MCPServer
from mcp.server.stdio import stdio_server

MAX_MESSAGE_BYTES = 256 * 1024 * 1024


async def run_stdio(server: MCPServer[Any]) -> None:
    """Serve ``server`` on stdin/stdout until the client closes stdin (or the task is cancelled)."""
    if not _readable_by_event_loop(0):
        await server.run_stdio_async()
        return
    lines = cast("anyio.AsyncFile[str]", _StdinLines())
    async with stdio_server(stdin=lines) as (read_stream, write_stream):
        lowlevel = server._lowlevel_server  # MCPServer has no public way to pass its own streams
        await lowlevel.run(read_stream, write_stream, lowlevel.create_initialization_options())


class _StdinLines:
    """The lines of stdin as ``str``, read by the event loop (``async for line in stdin``)."""

    def __aiter__(self) -> AsyncIterator[str]:
        return self._lines()

    async def _lines(self) -> AsyncIterator[str]:
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=MAX_MESSAGE_BYTES)
        pipe = os.fdopen(os.dup(0), "rb", buffering=0)
        transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), pipe)
        try:
            while line := await reader.readline():
                yield line.decode("utf-8", errors="replace")
        finally:
            transport.close()


def _readable_by_event_loop(fd: int) -> bool:
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or (stat.S_ISCHR(mode) and os.isatty(fd))
