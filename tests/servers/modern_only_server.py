"""The test tool set over stdio, serving only the 2026-07-28 protocol (no ``initialize`` handshake).

    python modern_only_server.py

A 2026-07-28-only server: ``initialize`` is refused with ``-32022`` (unsupported protocol version,
naming the versions it serves), ``server/discover`` and enveloped requests are answered. The MCP SDK
serves one era per connection; this runs its modern loop only (``mcp.server.runner``).
"""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
from mcp.server.runner import _serve_modern_stream
from mcp.server.stdio import stdio_server

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from servers.tools import build_server


async def main() -> None:
    server = build_server("ipybox-test-2026")._lowlevel_server
    async with stdio_server() as (read_stream, write_stream), server.lifespan(server) as state:
        await _serve_modern_stream(
            server, read_stream, write_stream, lifespan_state=state, raise_exceptions=False
        )


if __name__ == "__main__":
    anyio.run(main)
