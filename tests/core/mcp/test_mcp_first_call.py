"""A call held for approval has its first-call work done before the approval (issue 25).

The MCP client compiles a tool's output-schema validator on the tool's first structured result: in
a process that resumed an approval flow, right after the human approved. Connecting compiles the
validators of the listed tools, and the tool server's lookup of a call's tool (before it decides the
call) compiles any still missing. Real test MCP server over stdio, real tool server; the kernel side
is the runtime in a thread, as in the tool server's own tests. (On the previous code the validator
is compiled by the call, after the approval: every test here fails.)
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from ipybox_core import runtime
from ipybox_core.approval import ApprovalGate, ApprovalRequest
from ipybox_core.mcp import McpConnection, McpRegistry, _first_call
from ipybox_core.mcp._first_call import has_output_validator
from ipybox_core.mcp._schema_import import import_jsonschema
from ipybox_core.toolserver import ToolServer

pytest_plugins = ["servers.fixtures"]


def compiled(connection: McpConnection, tool: str) -> bool:
    """Whether the connection's MCP client holds a compiled output-schema validator for ``tool``."""
    session = connection._session
    assert session is not None and session.client is not None
    return has_output_validator(session.client.session, tool)


@pytest.fixture
async def registry(
    stdio_server_config: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[McpRegistry]:
    """The test server, connected, without compiling validators when connecting (the lookups do)."""
    monkeypatch.setattr(_first_call, "BACKGROUND_VALIDATORS", 0)
    async with McpRegistry() as registry:
        await registry.add("test", stdio_server_config)
        import_jsonschema()  # the connection started it in the background: done before the calls
        yield registry


async def test_connecting_compiles_the_validators_of_the_listed_tools(
    stdio_server_config: dict[str, Any],
) -> None:
    async with McpRegistry() as registry:
        await registry.add("test", stdio_server_config)
        connection = registry.connection("test")
        session = connection._session
        assert session is not None and session.validators_compiled is not None
        await asyncio.wait_for(session.validators_compiled, 120)
        with_schema = sorted(tool.name for tool in connection.tools if tool.output_schema is not None)
        assert {"add", "stats"} <= set(with_schema)
        assert [name for name in with_schema if not compiled(connection, name)] == []
        assert not compiled(connection, "echo")  # no output schema


async def test_a_held_call_has_its_output_validator_compiled_before_the_approval(
    registry: McpRegistry, tmp_path: Path
) -> None:
    connection = registry.connection("test")
    assert not compiled(connection, "stats")
    gate = ApprovalGate("always")
    held: asyncio.Queue[ApprovalRequest] = asyncio.Queue()
    gate.listen(held.put_nowait)
    server = ToolServer(registry, gate, heartbeat=0.5)
    await server.start_unix(tmp_path / "tools.sock")
    os.environ["IPYBOX_TOOL_SERVER"] = server.address
    os.environ["IPYBOX_TOOL_TOKEN"] = server.token
    try:
        call = asyncio.ensure_future(
            asyncio.to_thread(runtime.call_tool, "test", "stats", {"values": [1.0, 3.0]})
        )
        request = await asyncio.wait_for(held.get(), 60)
        assert request.tool == "stats"
        assert compiled(connection, "stats")  # before the approval, not after it
        await request.accept()
        response = await asyncio.wait_for(call, 60)
        assert response.structured == {"count": 2, "mean": 2.0, "minimum": 1.0, "maximum": 3.0}
        assert not compiled(connection, "add")  # only the tools that are called
    finally:
        await server.aclose()
        runtime._drop_connection()
        os.environ.pop("IPYBOX_TOOL_SERVER", None)
        os.environ.pop("IPYBOX_TOOL_TOKEN", None)


async def test_looking_a_tool_up_compiles_its_validator_only_while_connected(registry: McpRegistry) -> None:
    connection = registry.connection("test")
    connection.tool("add")
    assert compiled(connection, "add")
    connection.tool("echo")  # no output schema: nothing to compile
    assert not compiled(connection, "echo")
    await connection.disconnect()
    assert connection.tool("stats").name == "stats"  # known without a connection, nothing built
    assert (await connection.call("stats", {"values": [2.0]})).structured["count"] == 1
    assert compiled(connection, "stats")  # by the call, on the new connection
    assert not compiled(connection, "add")  # the new connection's client compiled only what it used
