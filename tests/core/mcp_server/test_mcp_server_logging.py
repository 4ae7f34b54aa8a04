"""``logging/setLevel`` on ``ipybox mcp``: the level is kept per client session and the log
notifications ipybox sends honour it.

A real ``ipybox mcp --transport streamable-http`` process and the MCP SDK's client. What ipybox
logs to a client: registering an MCP server (``info``: its module and tools; ``warning``: each tool
whose schema could not be fully typed). :data:`ODD_SERVER`'s ``odd`` tool (a property of an
unknown type) gets such a note.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from mcp import Client
from mcp_server_kit import HttpIpybox, http_client, start_http_ipybox
from mcp_types import LoggingMessageNotificationParams

from servers import PYTHON

ODD_SERVER = r"""
import json, sys
TOOL = {"name": "odd", "inputSchema": {"type": "object", "properties": {"x": {"type": "strange"}}}}
for line in sys.stdin:
    message = json.loads(line)
    if "id" not in message:
        continue
    method, params = message.get("method"), message.get("params") or {}
    if method == "initialize":
        reply = {"result": {"protocolVersion": params.get("protocolVersion"), "capabilities": {"tools": {}},
                            "serverInfo": {"name": "odd", "version": "0"}}}
    elif method == "tools/list":
        reply = {"result": {"tools": [TOOL]}}
    else:
        reply = {"error": {"code": -32601, "message": f"Method not found: {method}"}}
    print(json.dumps({"jsonrpc": "2.0", "id": message["id"], **reply}), flush=True)
"""
"""A stdio MCP server with one tool whose schema names a type that does not exist."""
ODD: dict[str, Any] = {"command": PYTHON, "args": ["-c", ODD_SERVER]}

# logging/setLevel is deprecated as of 2026-07-28 (the SDK warns); earlier versions still have it
pytestmark = pytest.mark.filterwarnings("ignore:The logging capability is deprecated")


@pytest.fixture(scope="module")
def ipybox(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpIpybox]:
    """One server for the module: each test opens its own client sessions."""
    server = start_http_ipybox(tmp_path_factory.mktemp("logging") / "ws", "--yes", "--warm-sessions", "0")
    yield server
    server.stop()


class Logs:
    """A client's ``notifications/message``: (level, text)."""

    def __init__(self) -> None:
        self.received: list[tuple[str, str]] = []

    async def __call__(self, params: LoggingMessageNotificationParams) -> None:
        assert params.logger == "ipybox", params
        self.received.append((params.level, str(params.data)))

    @property
    def levels(self) -> set[str]:
        return {level for level, _ in self.received}


def client(server: HttpIpybox, logs: Logs) -> Client:
    made = http_client(server.url, server.token)
    made.logging_callback = logs
    return made


async def register(session: Any, name: str) -> None:
    result = await session.call_tool("register_mcp_server", {"name": name, "config": ODD})
    assert not result.is_error, result


async def test_set_level_answers_empty_and_the_capability_is_announced(ipybox: HttpIpybox) -> None:
    async with client(ipybox, Logs()) as session:
        assert session.server_capabilities.logging is not None
        assert (await session.set_logging_level("info")).model_dump(exclude_none=True) == {}


async def test_each_session_gets_the_levels_it_set(ipybox: HttpIpybox) -> None:
    default, chatty, quiet = Logs(), Logs(), Logs()
    async with (
        client(ipybox, default) as first,
        client(ipybox, chatty) as second,
        client(ipybox, quiet) as third,
    ):
        await second.set_logging_level("debug")
        await third.set_logging_level("error")
        for session, name in ((first, "raw_a"), (second, "raw_b"), (third, "raw_c")):
            await register(session, name)
    # debug: the registration (info) and the typing notes (warning)
    assert chatty.levels == {"info", "warning"}, chatty.received
    assert any("registered MCP server 'raw_b'" in text for _, text in chatty.received)
    assert (
        "warning",
        "MCP server 'raw_b', tool 'odd': unknown type 'strange' at property 'x'; typed as Any",
    ) in chatty.received
    # no level set: warnings and above only
    assert default.levels == {"warning"}, default.received
    assert all("'raw_a'" in text for _, text in default.received)
    # error: nothing ipybox sent is that severe
    assert quiet.received == []


async def test_a_level_set_later_applies_to_the_next_requests(ipybox: HttpIpybox) -> None:
    logs = Logs()
    async with client(ipybox, logs) as session:
        await session.set_logging_level("emergency")
        await register(session, "raw_d")
        assert logs.received == []
        await session.set_logging_level("info")
        await register(session, "raw_e")
    assert logs.levels == {"info", "warning"} and all("'raw_e'" in text for _, text in logs.received)
