"""``ipybox mcp --yes --config mcp.json``: servers registered at start, secrets for MCP servers only,
auto-approval without elicitation, a broken config server, and ``install_package``."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import pytest_asyncio
from mcp import Client
from mcp_server_kit import (
    PROBE_MODULE,
    TEST_SERVER,
    ClientActor,
    build_probe_wheel,
    stdio_client,
    text_of,
    uninstall_probe,
)

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("startup")
    workspace = root / "ws"
    workspace.mkdir()
    (workspace / ".env").write_text(
        "# secrets\nSERVER_SECRET='for the MCP server only'\nexport KERNEL_ENV_GREETING=\"hello kernel\"\n"
    )
    config = {
        "mcpServers": {
            "test": {**TEST_SERVER, "env": {**TEST_SERVER["env"], "SECRET_FOR_SERVER": "${SERVER_SECRET}"}},
            "broken": {"command": str(root / "no-such-server")},
        }
    }
    (root / "mcp.json").write_text(json.dumps(config))
    return workspace


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def client(workspace: Path) -> AsyncIterator[Client]:
    config = workspace.parent / "mcp.json"
    # No elicitation callback: with --yes nothing needs one.
    async with ClientActor(stdio_client(workspace, "--yes", "--config", str(config), mode="auto")) as client:
        yield client


@pytest.fixture
def probe_wheel(tmp_path: Path) -> Iterator[Path]:
    uninstall_probe()
    yield build_probe_wheel(tmp_path)
    uninstall_probe()


async def run(client: Client, code: str) -> str:
    result = await client.call_tool("execute_code", {"code": code})
    assert not result.is_error, text_of(result)
    return text_of(result)


async def test_config_servers_are_registered_at_start_and_auto_approved(client: Client) -> None:
    text = await run(client, "from mcptools.test import add\nadd(a=2, b=40)")
    assert text == "42"


async def test_secrets_reach_mcp_servers_but_not_the_kernel(client: Client) -> None:
    text = await run(client, "from mcptools.test import env_var\nprint(env_var(name='SECRET_FOR_SERVER'))")
    assert text == "for the MCP server only"
    text = await run(
        client,
        "import os\nprint(os.environ.get('SERVER_SECRET'), os.environ.get('SECRET_FOR_SERVER'), "
        "os.environ.get('KERNEL_ENV_GREETING'), os.environ.get('GREETING'))",
    )
    assert text == "None None None hello kernel"


async def test_a_config_server_that_fails_is_reported_and_skipped(client: Client) -> None:
    listing = text_of(await client.call_tool("list_mcp_servers", {}))
    assert "test: `mcptools.test`" in listing
    assert "broken: FAILED to start" in listing and "no-such-server" in listing


async def test_install_package_makes_a_package_importable_in_the_running_kernel(
    client: Client, probe_wheel: Path
) -> None:
    missing = await run(client, f"import importlib.util\nimportlib.util.find_spec({PROBE_MODULE!r}) is None")
    assert missing == "True"
    result = await client.call_tool(
        "install_package", {"packages": [f"ipybox-install-probe @ {probe_wheel.as_uri()}"]}
    )
    assert not result.is_error, text_of(result)
    assert text_of(result).startswith("installed: ipybox-install-probe @ file://")
    assert await run(client, f"import {PROBE_MODULE}\n{PROBE_MODULE}.ANSWER") == "42"


async def test_install_package_refuses_pip_options(client: Client) -> None:
    for spec in ("--index-url=https://evil.example/simple", "-r requirements.txt", "x; rm -rf /"):
        result = await client.call_tool("install_package", {"packages": [spec]})
        assert result.is_error, spec
    assert "looks like a pip option" in text_of(
        await client.call_tool("install_package", {"packages": ["--index-url=x"]})
    )
