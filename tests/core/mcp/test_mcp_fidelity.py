"""Results as the server sent them, over stdio, Streamable HTTP and SSE (issue 27, items 4 to 6):
structured content without an output schema, results over 1 MiB and a size limit that names itself,
and JSON-RPC errors from a live server as ToolError."""

from __future__ import annotations

import asyncio
import os
import subprocess
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from ipybox_core.errors import McpServerError, ToolError
from ipybox_core.mcp import McpRegistry
from ipybox_core.mcp.results import ResultTooLarge
from servers import PYTHON, SERVERS_DIR
from servers.announce import start_announcing
from servers.fidelity_server import QUERY_ERROR_CODE

pytestmark = pytest.mark.asyncio(loop_scope="module")

FIDELITY_SCRIPT = SERVERS_DIR / "fidelity_server.py"
FIDELITY_STDIO: dict[str, Any] = {
    "command": PYTHON,
    "args": [str(FIDELITY_SCRIPT)],
    "env": {"PYTHONUNBUFFERED": "1"},
}
TRANSPORTS = ["stdio", "http", "sse"]


def start_fidelity_http(log: Path) -> tuple[subprocess.Popen[str], int]:
    """Start ``fidelity_server.py http`` and wait for its ``PORT <n>`` line."""
    command = [PYTHON, str(FIDELITY_SCRIPT), "http"]
    process, (port,) = start_announcing(command, "PORT", log, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    return process, int(port)


@pytest.fixture(scope="module")
def fidelity_port(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    process, port = start_fidelity_http(tmp_path_factory.mktemp("fidelity") / "server.log")
    yield port
    process.terminate()
    process.wait(timeout=10)


def configs(port: int, **extra: Any) -> dict[str, dict[str, Any]]:
    return {
        "stdio": {**FIDELITY_STDIO, **extra},
        "http": {"url": f"http://127.0.0.1:{port}/mcp", **extra},
        "sse": {"url": f"http://127.0.0.1:{port}/sse", **extra},
    }


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def registry(fidelity_port: int) -> AsyncIterator[McpRegistry]:
    async with McpRegistry(connect_timeout=60, call_timeout=120) as registry:
        await asyncio.gather(*(registry.add(n, c) for n, c in configs(fidelity_port).items()))
        yield registry


@pytest.mark.parametrize("server", TRANSPORTS)
async def test_structured_content_without_output_schema_is_kept(registry: McpRegistry, server: str) -> None:
    assert registry.tool(server, "open_document").output_schema is None
    result = await registry.call(server, "open_document", {"name": "a.pdf"})
    assert result.text == "opened a.pdf"
    assert result.structured == {"requestId": "req-a.pdf", "pages": 3}


@pytest.mark.parametrize("server", TRANSPORTS)
async def test_a_5_mb_result_arrives_on_every_transport(registry: McpRegistry, server: str) -> None:
    result = await registry.call(server, "big_text", {"megabytes": 5})
    assert len(result.text) == 5_000_000


@pytest.mark.parametrize("server", TRANSPORTS)
async def test_a_result_over_max_result_bytes_names_the_setting(fidelity_port: int, server: str) -> None:
    config = configs(fidelity_port, max_result_bytes=4_000_000)[server]  # big_text sends its text twice
    async with McpRegistry(connect_timeout=60, call_timeout=120) as registry:
        await registry.add(server, config)
        assert len((await registry.call(server, "big_text", {"megabytes": 1.5})).text) == 1_500_000
        with pytest.raises(ResultTooLarge) as error:
            await registry.call(server, "big_text", {"megabytes": 3})
        assert isinstance(error.value, ToolError) and not isinstance(error.value, McpServerError)
        assert "max_result_bytes" in str(error.value) and "4000000 bytes" in str(error.value)
        assert "lost the connection" not in str(error.value)
        assert (await registry.call(server, "paint", {"colour": "teal"})).text == "painted teal"


@pytest.mark.parametrize("server", TRANSPORTS)
async def test_a_json_rpc_error_from_a_live_server_is_a_tool_error(
    registry: McpRegistry, server: str
) -> None:
    with pytest.raises(ToolError) as error:
        await registry.call(server, "run_query", {"sql": "DELETE everything"})
    assert not isinstance(error.value, McpServerError)  # the server is alive: not "crashed or disconnected"
    assert error.value.code == QUERY_ERROR_CODE and error.value.data == {"position": 1}
    assert "syntax error near 'DELETE'" in str(error.value)
    assert (error.value.server, error.value.tool) == (server, "run_query")
    assert (await registry.call(server, "run_query", {"sql": "select 1"})).text == "1 row"
