"""Registry lifecycle: restart, replace, remove, close (no process left), protocol modes."""

from __future__ import annotations

from typing import Any

import pytest

from ipybox_core.errors import McpConnectionError, McpTimeout, UnknownToolError
from ipybox_core.mcp import McpConnection, McpRegistry, parse_server_config
from servers.processes import command_line, descendant_pids

pytest_plugins = ["servers.fixtures"]


async def test_restart_closes_every_connection_and_reconnects_lazily(
    clean_raw_server_config: dict[str, Any], http_server_url: str
) -> None:
    async with McpRegistry() as registry:
        await registry.add("raw", clean_raw_server_config)
        await registry.add("http", {"url": http_server_url})
        old_pid = int((await registry.call("raw", "pid")).text)
        tools_before = registry.tools("raw")
        await registry.restart()
        assert not registry.connection("raw").connected
        assert not registry.connection("http").connected
        assert old_pid not in descendant_pids()
        assert registry.tools("raw") == tools_before  # still known without a connection
        assert int((await registry.call("raw", "pid")).text) != old_pid
        assert (await registry.call("http", "add", {"a": 2, "b": 3})).structured == {"result": 5}
        assert registry.connection("raw").connected


async def test_replace_and_remove(clean_raw_server_config: dict[str, Any], http_server_url: str) -> None:
    async with McpRegistry() as registry:
        await registry.add("svc", clean_raw_server_config)
        raw_pid = int((await registry.call("svc", "pid")).text)
        tools = await registry.add("svc", {"url": http_server_url})
        assert "create_order" in {tool.name for tool in tools}
        assert registry.servers == ["svc"]
        assert raw_pid not in descendant_pids()  # the replaced server was stopped
        assert (await registry.call("svc", "echo", {"message": "new"})).text == "new"
        await registry.remove("svc")
        assert registry.servers == []
        with pytest.raises(UnknownToolError):
            await registry.call("svc", "echo", {"message": "gone"})
        with pytest.raises(UnknownToolError):
            await registry.remove("svc")


async def test_aclose_leaves_no_child_process(
    stdio_server_config: dict[str, Any], clean_raw_server_config: dict[str, Any]
) -> None:
    before = descendant_pids()
    registry = McpRegistry()
    await registry.add("python", stdio_server_config)
    await registry.add("raw", clean_raw_server_config)
    started = descendant_pids() - before
    assert len(started) == 2, [command_line(pid) for pid in started]
    log_dir = registry.log_dir
    assert (log_dir / "python.stderr.log").exists()
    await registry.aclose()
    assert descendant_pids() - before == set()
    assert not log_dir.exists()
    assert registry.servers == []


async def test_aclose_after_a_crash_leaves_no_child_process(clean_raw_server_config: dict[str, Any]) -> None:
    before = descendant_pids()
    async with McpRegistry() as registry:
        await registry.add("raw", clean_raw_server_config)
        with pytest.raises(McpConnectionError):
            await registry.call("raw", "die")
    assert descendant_pids() - before == set()


async def test_closed_connection_refuses_calls(clean_raw_server_config: dict[str, Any]) -> None:
    connection = McpConnection("raw", parse_server_config("raw", clean_raw_server_config), call_timeout=5)
    assert connection.tools == [] and not connection.connected
    result = await connection.call("echo", {"text": "lazy connect"})
    assert result.text == "lazy connect"
    assert connection.last_connect_seconds is not None
    log = connection.stderr_log
    assert log is not None and log.exists()
    await connection.aclose()
    assert not log.exists()  # the connection owned its temporary log directory
    with pytest.raises(McpConnectionError, match="is closed"):
        await connection.call("echo", {"text": "x"})


async def test_stderr_log_in_a_given_directory(
    clean_raw_server_config: dict[str, Any], tmp_path: Any
) -> None:
    async with McpRegistry(log_dir=tmp_path) as registry:
        await registry.add("raw", clean_raw_server_config)
        with pytest.raises(McpConnectionError):
            await registry.call("raw", "die")
    log = (tmp_path / "raw.stderr.log").read_text()
    assert "raw server: dying on request" in log  # the directory given by the application is kept


@pytest.mark.parametrize("protocol", ["legacy", "auto"])
async def test_protocol_modes(http_server_url: str, protocol: str) -> None:
    async with McpRegistry() as registry:
        await registry.add("http", {"url": http_server_url, "protocol": protocol})
        result = await registry.call("http", "stats", {"values": [1, 2, 3]})
        assert result.structured == {"count": 3, "mean": 2.0, "minimum": 1.0, "maximum": 3.0}


async def test_per_server_call_timeout_overrides_the_default(http_server_url: str) -> None:
    async with McpRegistry(call_timeout=300) as registry:
        await registry.add("quick", {"url": http_server_url, "call_timeout": 0.2})
        with pytest.raises(McpTimeout, match=r"within 0\.2 s"):
            await registry.call("quick", "sleep", {"seconds": 30})
        assert (await registry.call("quick", "sleep", {"seconds": 0.01}, timeout=10)).text == "slept 0.01"
