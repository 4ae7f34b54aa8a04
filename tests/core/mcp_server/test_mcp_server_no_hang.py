"""``ipybox mcp`` over stdio does not hang: SIGTERM stops it at once even while the client keeps stdin
open (taking its kernel and MCP servers with it; SIGINT: see the Streamable HTTP tests), and an
approval nobody answers times out."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from mcp_server_kit import (
    ECHO_SERVER,
    ClientActor,
    Elicitations,
    alive,
    descendants,
    ipybox_mcp_command,
    stdio_client,
    text_of,
)

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    },
}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}
# Answered once the kernel is up and the config server registered.
LIST_SERVERS = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "list_mcp_servers"}}


def send(process: subprocess.Popen[bytes], message: dict[str, Any]) -> None:
    assert process.stdin is not None
    process.stdin.write(json.dumps(message).encode() + b"\n")
    process.stdin.flush()


def receive(process: subprocess.Popen[bytes]) -> dict[str, Any]:
    assert process.stdout is not None
    reply = json.loads(process.stdout.readline())
    assert isinstance(reply, dict)
    return reply


def test_sigterm_stops_the_server_and_its_processes(tmp_path: Path) -> None:
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"echo": ECHO_SERVER}}))
    process = subprocess.Popen(
        ipybox_mcp_command(tmp_path / "ws", "--yes", "--config", str(config)),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    try:
        send(process, INITIALIZE)
        assert "result" in receive(process)
        send(process, INITIALIZED)
        send(process, LIST_SERVERS)
        reply = receive(process)
        assert "echo: `mcptools.echo`" in reply["result"]["content"][0]["text"]
        tree = descendants(process.pid)
        assert len(tree) >= 3, tree  # ipybox mcp, the kernel, the echo MCP server
        process.send_signal(signal.SIGTERM)  # stdin stays open
        exit_code = process.wait(30)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert exit_code == 0
    deadline = time.monotonic() + 10
    while alive(tree) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert alive(tree) == set()


async def test_an_unanswered_approval_times_out_into_permission_error(tmp_path: Path) -> None:
    """The client never answers the elicitation: after --approval-timeout the call is rejected and
    execute_code returns (it does not wait for the answer forever)."""
    elicitations = Elicitations(hold=asyncio.Event())  # never set: no answer
    client = stdio_client(
        tmp_path / "ws", "--approval-timeout", "1", mode="legacy", elicitations=elicitations
    )
    async with ClientActor(client) as session:
        await session.call_tool("register_mcp_server", {"name": "echo", "config": ECHO_SERVER})
        code = "from mcptools.echo import echo\ntry:\n    echo(text='x')\nexcept PermissionError as e:\n    print(e)"
        result = await asyncio.wait_for(session.call_tool("execute_code", {"code": code}), 60)
        elicitations.hold.set()  # type: ignore[union-attr]
    assert text_of(result) == "echo.echo was rejected: approval timed out after 1 s without a decision"
    assert len(elicitations.messages) == 1
