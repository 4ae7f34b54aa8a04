"""Servers that die, hang or never start: clean errors, reconnection, nothing else disturbed."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pytest

from ipybox_core.errors import McpConnectionError
from ipybox_core.mcp import McpRegistry
from servers import PYTHON
from servers.processes import descendant_pids

if TYPE_CHECKING:
    from servers.fixtures import HttpTestServer

pytest_plugins = ["servers.fixtures"]


async def wait_until_sleeping(registry: McpRegistry, server: str, count: int) -> None:
    """Wait until ``count`` sleeps are running in the server (at most 20 s)."""
    for _ in range(400):
        stats = (await registry.call(server, "sleep_stats")).structured
        if stats["started"] - stats["finished"] - stats["cancelled"] >= count:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"{count} sleeps never ran in {server}")


async def test_stdio_server_exiting_mid_call_fails_cleanly_and_reconnects(
    clean_raw_server_config: dict[str, Any], http_server_url: str
) -> None:
    async with McpRegistry() as registry:
        await registry.add("raw", clean_raw_server_config)
        await registry.add("other", {"url": http_server_url})
        first_pid = int((await registry.call("raw", "pid")).text)
        with pytest.raises(McpConnectionError) as error:
            await registry.call("raw", "die")
        assert error.value.server == "raw"
        assert "during the call to 'die'" in str(error.value)
        assert "raw server: dying on request" in str(error.value)  # the tail of the server's stderr
        assert (await registry.call("other", "add", {"a": 1, "b": 1})).structured == {"result": 2}
        second_pid = int((await registry.call("raw", "pid")).text)  # reconnected
        assert second_pid != first_pid
        assert first_pid not in descendant_pids()
        assert (await registry.call("raw", "echo", {"text": "back"})).text == "back"


async def test_stdio_server_killed_during_a_long_call(
    stdio_server_config: dict[str, Any], http_server_url: str
) -> None:
    async with McpRegistry() as registry:
        await registry.add("victim", stdio_server_config)
        await registry.add("other", {"url": http_server_url})
        pid = (await registry.call("victim", "whoami")).structured["pid"]
        doomed = asyncio.create_task(registry.call("victim", "sleep", {"seconds": 60}))
        bystander = asyncio.create_task(registry.call("other", "sleep", {"seconds": 0.5}))
        await wait_until_sleeping(registry, "victim", 1)
        os.kill(pid, signal.SIGKILL)
        with pytest.raises(McpConnectionError, match="lost the connection during the call to 'sleep'"):
            await doomed
        assert (await bystander).text == "slept 0.5"
        assert (await registry.call("victim", "whoami")).structured["pid"] != pid


async def test_http_and_sse_server_killed_mid_call_leaves_the_host_task_alone(
    http_server_factory: Callable[..., HttpTestServer], http_server_url: str
) -> None:
    remote = http_server_factory()
    async with McpRegistry(connect_timeout=5) as registry:
        await registry.add("http", {"url": remote.url})
        await registry.add("sse", {"url": remote.sse_url})
        await registry.add("other", {"url": http_server_url})
        calls = [
            asyncio.create_task(registry.call("http", "sleep", {"seconds": 60})),
            asyncio.create_task(registry.call("sse", "sleep", {"seconds": 60})),
        ]
        await wait_until_sleeping(registry, "http", 2)  # one process serves both endpoints
        remote.kill()
        for call in calls:
            with pytest.raises(McpConnectionError) as error:
                await call
            assert "lost the connection" in str(error.value)
        host = asyncio.current_task()
        assert host is not None and host.cancelling() == 0
        await asyncio.sleep(0.05)  # a cancelled host task would raise here
        assert (await registry.call("other", "echo", {"message": "fine"})).text == "fine"
        for server in ("http", "sse"):
            with pytest.raises(McpConnectionError, match=f"cannot connect to MCP server '{server}'"):
                await registry.call(server, "echo", {"message": "x"})
        # the server comes back on the same port: the next calls reconnect
        http_server_factory(port=remote.port)
        assert (await registry.call("http", "echo", {"message": "again"})).text == "again"
        assert (await registry.call("sse", "echo", {"message": "again"})).text == "again"


async def test_http_server_killed_between_calls_reconnects_after_restart(
    http_server_factory: Callable[..., HttpTestServer],
) -> None:
    remote = http_server_factory()
    async with McpRegistry(connect_timeout=5) as registry:
        await registry.add("http", {"url": remote.url})
        assert (await registry.call("http", "count")).structured == {"result": 1}
        remote.kill()
        with pytest.raises(McpConnectionError):
            await registry.call("http", "count")
        http_server_factory(port=remote.port)
        assert (await registry.call("http", "count")).structured == {"result": 1}  # a fresh server process


async def test_command_not_found() -> None:
    async with McpRegistry() as registry:
        with pytest.raises(McpConnectionError) as error:
            await registry.add("ghost", {"command": "/nonexistent/mcp-server", "args": ["--x"]})
        assert "cannot connect to MCP server 'ghost'" in str(error.value)
        assert "/nonexistent/mcp-server" in str(error.value)
        assert registry.servers == []


async def test_server_exiting_at_start_shows_its_stderr() -> None:
    script = "import sys; sys.stderr.write('boom: missing API key\\n'); sys.exit(3)"
    async with McpRegistry() as registry:
        with pytest.raises(McpConnectionError) as error:
            await registry.add("broken", {"command": PYTHON, "args": ["-c", script]})
        assert "boom: missing API key" in str(error.value)
        assert "Connection closed" in str(error.value)


async def test_http_nothing_listening() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    async with McpRegistry(connect_timeout=5) as registry:
        for config in ({"url": f"http://127.0.0.1:{port}/mcp"}, {"url": f"http://127.0.0.1:{port}/sse"}):
            with pytest.raises(McpConnectionError, match="ConnectError"):
                await registry.add("down", config)
        assert registry.servers == []


async def test_connect_timeout_against_a_mute_server(clean_raw_server_config: dict[str, Any]) -> None:
    before = descendant_pids()
    mute = {
        **clean_raw_server_config,
        "args": [*clean_raw_server_config["args"], "--mute"],
        "connect_timeout": 0.5,
    }
    async with McpRegistry(connect_timeout=30) as registry:
        with pytest.raises(McpConnectionError, match=r"did not connect within 0\.5 s"):
            await registry.add("mute", mute)
    assert descendant_pids() - before == set()


async def test_caller_cancelled_while_connecting_leaves_nothing_behind(
    clean_raw_server_config: dict[str, Any],
) -> None:
    before = descendant_pids()
    mute = {**clean_raw_server_config, "args": [*clean_raw_server_config["args"], "--mute"]}
    async with McpRegistry(connect_timeout=30) as registry:
        adding = asyncio.create_task(registry.add("mute", mute))
        for _ in range(200):  # until the server process exists
            if descendant_pids() - before:
                break
            await asyncio.sleep(0.02)
        adding.cancel()
        with pytest.raises(asyncio.CancelledError):
            await adding
        assert registry.servers == []
    assert descendant_pids() - before == set()


async def test_failed_replacement_keeps_the_old_server(clean_raw_server_config: dict[str, Any]) -> None:
    async with McpRegistry() as registry:
        await registry.add("svc", clean_raw_server_config)
        with pytest.raises(McpConnectionError):
            await registry.add("svc", {"command": "/nonexistent/other"})
        assert registry.servers == ["svc"]
        assert (await registry.call("svc", "echo", {"text": "kept"})).text == "kept"


async def test_stdio_server_dying_while_idle_is_restarted_and_the_next_result_says_so(
    clean_raw_server_config: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    async with McpRegistry() as registry:
        await registry.add("raw", clean_raw_server_config)
        pid = int((await registry.call("raw", "pid")).text)
        os.kill(pid, signal.SIGKILL)
        connection = registry.connection("raw")
        for _ in range(400):  # the end of the server's stdout closes the connection
            if not connection.connected:
                break
            await asyncio.sleep(0.02)
        assert not connection.connected
        restarted = await registry.call("raw", "pid")
        assert int(restarted.text) != pid  # no error: reconnected first
        (notice,) = restarted.notices
        assert notice.startswith("MCP server 'raw' had stopped (") and "was restarted" in notice
        assert "whatever it kept from earlier calls is gone" in notice
        assert notice in caplog.text  # the application's log gets it too
        assert (await registry.call("raw", "pid")).notices == ()  # said once
        await connection.disconnect()  # closed by the application: nothing to report
        assert (await registry.call("raw", "pid")).notices == ()
