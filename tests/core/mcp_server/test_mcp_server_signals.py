"""``ipybox mcp`` over stdio stops at once on SIGTERM, even while the client keeps stdin open, and
takes its kernel and MCP servers with it (SIGINT: see the Streamable HTTP tests)."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from mcp_server_kit import ECHO_SERVER, alive, descendants, ipybox_mcp_command

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
