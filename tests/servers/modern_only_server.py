"""The test tool set over stdio, serving only the 2026-07-28 protocol (no ``initialize`` handshake).

    python modern_only_server.py [--no-result-type]

A 2026-07-28-only server: ``initialize`` is refused with ``-32022`` (unsupported protocol version,
naming the versions it serves), ``server/discover`` and enveloped requests are answered. The MCP SDK
serves one era per connection; this runs its modern loop only (``mcp.server.runner``).
``--no-result-type`` leaves ``resultType`` out of every result (absent means ``"complete"``).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import anyio
from mcp.server.runner import _serve_modern_stream
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from mcp.types import JSONRPCResponse

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from servers.tools import build_server


class _WithoutResultType:
    """A write stream that drops ``resultType`` from each result it passes on."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    async def send(self, item: SessionMessage) -> None:
        message = item.message
        if isinstance(message, JSONRPCResponse) and isinstance(message.result, dict):
            message.result.pop("resultType", None)
        await self.inner.send(item)

    async def __aenter__(self) -> _WithoutResultType:
        await self.inner.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.inner.__aexit__(*exc)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


async def main() -> None:
    server = build_server("ipybox-test-2026")._lowlevel_server
    async with stdio_server() as (read_stream, write_stream), server.lifespan(server) as state:
        out: Any = _WithoutResultType(write_stream) if "--no-result-type" in sys.argv else write_stream
        await _serve_modern_stream(server, read_stream, out, lifespan_state=state, raise_exceptions=False)


if __name__ == "__main__":
    anyio.run(main)
