"""The default config reaches 2025 servers with the ``initialize`` handshake and 2026-07-28-only servers
by falling back to ``server/discover`` when ``initialize`` is refused."""

from __future__ import annotations

import sys

import pytest

from ipybox_core.errors import McpConnectionError
from ipybox_core.mcp import McpRegistry
from servers import PYTHON, RAW_SERVER_SCRIPT, SERVERS_DIR

pytestmark = pytest.mark.asyncio

MODERN_ONLY = {"command": PYTHON, "args": [str(SERVERS_DIR / "modern_only_server.py")]}


async def test_default_config_reaches_a_2026_only_server_and_reconnects_to_it() -> None:
    async with McpRegistry(connect_timeout=60, call_timeout=30) as registry:
        tools = await registry.add("modern", MODERN_ONLY)
        assert "add" in {tool.name for tool in tools}
        assert (await registry.call("modern", "add", {"a": 1, "b": 2})).text == "3"
        assert registry.connection("modern").protocol_version == "2026-07-28"
        await registry.restart()  # the next call reconnects, straight to 2026-07-28
        assert (await registry.call("modern", "add", {"a": 2, "b": 2})).text == "4"
        assert registry.connection("modern").protocol_version == "2026-07-28"


async def test_legacy_only_still_says_the_server_refused_initialize() -> None:
    async with McpRegistry(connect_timeout=60) as registry:
        with pytest.raises(McpConnectionError, match="-32022: connection is serving the 2026-07-28 protocol"):
            await registry.add("modern", {**MODERN_ONLY, "protocol": "legacy"})


async def test_default_config_does_not_probe_a_server_that_ignores_unknown_methods() -> None:
    """``"auto"`` waits 10 s for an answer to its ``server/discover`` probe from such a server."""
    server = {"command": sys.executable, "args": [str(RAW_SERVER_SCRIPT), "--clean", "--drop-unknown"]}
    async with McpRegistry(connect_timeout=8) as registry:
        await registry.add("old", server)
        assert registry.connection("old").protocol_version != "2026-07-28"


async def test_a_2026_result_without_result_type_is_complete() -> None:
    server = {**MODERN_ONLY, "args": [*MODERN_ONLY["args"], "--no-result-type"]}
    async with McpRegistry(connect_timeout=60, call_timeout=30) as registry:
        await registry.add("modern", server)
        assert (await registry.call("modern", "add", {"a": 1, "b": 2})).text == "3"
        assert (await registry.call("modern", "stats", {"values": [1, 2, 3]})).structured["mean"] == 2.0


async def test_a_2026_server_is_asked_for_its_log_messages() -> None:
    async with McpRegistry(connect_timeout=60, call_timeout=30) as registry:
        await registry.add("modern", MODERN_ONLY)
        result = await registry.call("modern", "chatty", {"lines": 1})
        assert result.notices == ("[mcp:modern] info: step 1 of 1", "[mcp:modern] progress 1/1: step 1")
