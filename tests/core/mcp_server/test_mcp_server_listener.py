"""The ``ipybox mcp``/``ipybox serve`` HTTP listener against clients without a token.

Real ``ipybox mcp --transport streamable-http`` processes on loopback, attacked over real sockets:

- **slowloris**: with the service at 256 open files, 240 connections that never finish their
  headers, then a flood of malformed requests. An authenticated client still runs code, the
  process keeps its descriptors, the log stays a few lines. The control serves with uvicorn's plain
  protocol (no header timeout, no caps): the same attack locks the authenticated client out.
- **DNS rebinding**: ``--no-auth`` on ``127.0.0.2`` (loopback, but not one of the three names the
  MCP SDK protects). A request with an attacker's ``Host`` or ``Origin`` is refused; the proper
  ``Host`` works. The control builds the app as before (the SDK's protection only): the
  attacker's ``Host`` runs code.
"""

from __future__ import annotations

import asyncio
import os
import re
import select
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp_server_kit import HttpIpybox, http_client, text_of

from ipybox_core.mcp_server.auth import allowed_hosts

# Runs ``ipybox`` with RLIMIT_NOFILE lowered (argv[1], 0: unchanged) and one protection removed
# for the controls (argv[2]): "none", "no-listener-limits" (uvicorn's plain HTTP/1.1 protocol), or
# "host-check-as-before" (the HTTP app as it was built before every --no-auth bind was checked).
LAUNCHER = r"""
import resource, sys
nofile, weakening, *argv = sys.argv[1:]
if int(nofile):
    resource.setrlimit(resource.RLIMIT_NOFILE, (int(nofile), resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
if weakening == "no-listener-limits":
    from uvicorn.protocols.http.h11_impl import H11Protocol
    import ipybox_core._http_listener as listener
    listener.bounded_h11 = lambda limits, **_: H11Protocol
elif weakening == "host-check-as-before":
    from ipybox_core.mcp_server import server

    def http_app(mcp, service, *, host, token, **_):
        app = server._EndSessions(mcp.streamable_http_app(host=host), service)
        return server.BearerAuth(app, token) if token is not None else app

    server.http_app = http_app
elif weakening != "none":
    raise SystemExit(f"unknown weakening {weakening}")
from ipybox_core.cli import main
sys.exit(main(argv))
"""

NOFILE = 256
ATTACK_CONNECTIONS = 240
HEADER_TIMEOUT = 4.0
"""``--header-timeout`` of the slowloris test (the default, 10 s, would only make it wait longer)."""
SIX_TIMES_SEVEN = {"code": "print(6 * 7)"}


def start_ipybox(workspace: Path, *args: str, nofile: int = 0, weakening: str = "none") -> HttpIpybox:
    """``ipybox mcp`` over Streamable HTTP on a free port, through :data:`LAUNCHER`."""
    workspace.mkdir()
    log = workspace.parent / f"{workspace.name}.stderr.log"
    command = [sys.executable, "-c", LAUNCHER, str(nofile), weakening, "mcp", "--workspace", str(workspace)]
    with log.open("wb") as stderr:
        process = subprocess.Popen(
            [*command, "--transport", "streamable-http", "--port", "0", *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and process.poll() is None:
        text = log.read_text()
        if match := re.search(r"listening on (http://\S+)", text):
            printed = re.search(r'"Authorization: Bearer ([^"<>]+)"', text)
            return HttpIpybox(process, match.group(1), workspace, printed.group(1) if printed else None, log)
        time.sleep(0.05)
    process.kill()
    process.wait()
    raise RuntimeError(f"ipybox mcp did not start:\n{log.read_text()}")


@pytest.fixture
def servers() -> Iterator[list[HttpIpybox]]:
    started: list[HttpIpybox] = []
    yield started
    for server in started:
        server.stop()


def address(server: HttpIpybox) -> tuple[str, int]:
    match = re.match(r"http://([^:/]+):(\d+)/", server.url)
    assert match, server.url
    return match.group(1), int(match.group(2))


def open_files(server: HttpIpybox) -> int:
    return len(os.listdir(f"/proc/{server.process.pid}/fd"))


# --- slowloris ------------------------------------------------------------------------------------


def slowloris(server: HttpIpybox, count: int) -> list[socket.socket]:
    """``count`` connections that send part of a request head and stop (those that connect in 5 s)."""
    socks = []
    for _ in range(count):
        # Connections made faster than the server accepts them fill its accept queue; then Linux
        # drops the next SYN and that connect waits a second for the retry. Waiting until the
        # server has taken the queued ones opens as many connections in a fraction of the time
        # (a moment at most: a server out of descriptors, as in the control, takes none).
        drained(server, seconds=0.25)
        try:
            sock = socket.create_connection(address(server), timeout=5)
            sock.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n")
        except OSError:
            continue
        socks.append(sock)
    return socks


def drained(server: HttpIpybox, *, seconds: float) -> None:
    """Wait (at most ``seconds``) until fewer than 4 connections wait in the accept queue of
    ``server``'s listening socket (``/proc/net/tcp`` shows its length for a listening socket)."""
    _, port = address(server)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
            _, local, _, state, queues, *_ = line.split()
            if state == "0A" and int(local.rsplit(":", 1)[1], 16) == port:
                if int(queues.split(":")[1], 16) < 4:
                    return
                break
        else:
            return  # not listening on IPv4 loopback: nothing to wait for
        time.sleep(0.002)


async def runs_code(client: Client, timeout: float) -> str | None:
    """The output of ``print(6 * 7)`` through ``client``, or ``None`` when it fails or times out."""

    async def call() -> str:
        async with client:
            return text_of(await client.call_tool("execute_code", SIX_TIMES_SEVEN))

    try:
        return await asyncio.wait_for(call(), timeout)
    except Exception:
        return None


def malformed_requests(server: HttpIpybox, count: int) -> None:
    for _ in range(count):
        with socket.create_connection(address(server), timeout=30) as sock:
            sock.sendall(b"NOT HTTP AT ALL\r\n\r\n")
            sock.recv(4096)


def closed_within(sock: socket.socket, seconds: float) -> bool:
    readable, _, _ = select.select([sock], [], [], seconds)
    try:
        return bool(readable) and sock.recv(4096) == b""
    except ConnectionResetError:
        return True


async def test_header_incomplete_connections_do_not_lock_out_an_authenticated_client(
    tmp_path: Path, servers: list[HttpIpybox]
) -> None:
    server = start_ipybox(tmp_path / "ws", "--header-timeout", str(HEADER_TIMEOUT), nofile=NOFILE)
    servers.append(server)
    socks = await asyncio.to_thread(slowloris, server, ATTACK_CONNECTIONS)
    try:
        assert len(socks) == ATTACK_CONNECTIONS  # the listener accepts them all (and sheds them)
        held = open_files(server)
        assert held < NOFILE // 2, f"{held} descriptors open during the attack"
        # the cap on waiting connections shed them (not only the header timeout)
        assert "closing the oldest" in server.log.read_text(), server.log.read_text()[-3000:]
        # A connection that stops mid-head is closed at the header timeout: it is opened now, so
        # the client's call below runs while it waits. It is the newest waiting connection and
        # the client opens only a few, so it is never the oldest one evicted.
        [late] = await asyncio.to_thread(slowloris, server, 1)
        output = await runs_code(http_client(server.url, server.token), timeout=300)
        assert output is not None and "42" in output, server.log.read_text()[-3000:]
        assert await asyncio.to_thread(closed_within, late, 120)
        late.close()
        await asyncio.to_thread(malformed_requests, server, 300)
    finally:
        for sock in socks:
            sock.close()
    assert server.process.poll() is None
    lines = server.log.read_text().splitlines()
    assert len(lines) <= 6, "\n".join(lines[:40])


async def test_control_without_the_limits_the_attack_locks_the_client_out(
    tmp_path: Path, servers: list[HttpIpybox]
) -> None:
    server = start_ipybox(tmp_path / "ws", nofile=NOFILE, weakening="no-listener-limits")
    servers.append(server)
    socks = await asyncio.to_thread(slowloris, server, ATTACK_CONNECTIONS)
    try:
        # The attack holds every descriptor the server may open (it accepts the attack's last
        # connections a moment after they were made). Held before and after the client's attempt,
        # the server cannot even accept the client's connection for as long as the attack lasts:
        # a few seconds without an answer show the lock-out as well as a longer wait would.
        assert await _reaches(lambda: open_files(server) >= NOFILE - 1, seconds=60), open_files(server)
        assert await runs_code(http_client(server.url, server.token), timeout=5) is None
        assert open_files(server) >= NOFILE - 1, open_files(server)
    finally:
        for sock in socks:
            sock.close()
    # the same server runs the same call once the attack ends: only the attack locked it out
    output = await runs_code(http_client(server.url, server.token), timeout=300)
    assert output is not None and "42" in output, server.log.read_text()[-3000:]


async def _reaches(condition: Callable[[], bool], *, seconds: float) -> bool:
    """Whether ``condition`` holds within ``seconds`` (checked every 50 ms)."""
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.05)
    return True


# --- DNS rebinding --------------------------------------------------------------------------------

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    },
}


def initialize_status(server: HttpIpybox, **headers: str) -> int:
    accept = {"Accept": "application/json, text/event-stream", **headers}
    with httpx.Client(timeout=60) as client:
        return client.post(server.url, json=INITIALIZE, headers=accept).status_code


def rebound_client(server: HttpIpybox) -> Client:
    """A client that reaches the server while naming the attacker's host, as a rebound browser does."""
    _, port = address(server)
    http = create_mcp_http_client(headers={"Host": f"evil.example:{port}"})
    return Client(streamable_http_client(server.url, http_client=http), read_timeout_seconds=120)


async def test_no_auth_on_any_loopback_address_checks_host_and_origin(
    tmp_path: Path, servers: list[HttpIpybox]
) -> None:
    server = start_ipybox(tmp_path / "ws", "--no-auth", "--host", "127.0.0.2", "--warm-sessions", "0")
    servers.append(server)
    _, port = address(server)
    assert server.url.startswith("http://127.0.0.2:") and server.token is None
    assert initialize_status(server, Host=f"evil.example:{port}") == 421
    assert initialize_status(server, Host="evil.example") == 421
    assert initialize_status(server, Origin=f"http://evil.example:{port}") == 403
    assert initialize_status(server, Origin="null") == 403
    assert initialize_status(server, Origin=f"http://127.0.0.2:{port}") == 200
    assert initialize_status(server, Host=f"localhost:{port}") == 200
    assert await runs_code(rebound_client(server), timeout=120) is None
    output = await runs_code(http_client(server.url, None), timeout=300)
    assert output is not None and "42" in output, server.log.read_text()[-3000:]


async def test_control_the_sdks_protection_alone_lets_the_rebound_request_run_code(
    tmp_path: Path, servers: list[HttpIpybox]
) -> None:
    server = start_ipybox(
        tmp_path / "ws",
        "--no-auth",
        "--host",
        "127.0.0.2",
        "--warm-sessions",
        "0",
        weakening="host-check-as-before",
    )
    servers.append(server)
    output = await runs_code(rebound_client(server), timeout=300)
    assert output is not None and "42" in output, server.log.read_text()[-3000:]


def test_the_allowed_hosts_are_the_bound_address_and_localhost() -> None:
    assert allowed_hosts("127.0.0.2", 8000).hosts == {"127.0.0.2:8000", "localhost:8000"}
    assert allowed_hosts("::1", 8000).hosts == {"[::1]:8000", "localhost:8000"}
    assert allowed_hosts("127.0.0.1", 80).hosts == {"127.0.0.1:80", "localhost:80", "127.0.0.1", "localhost"}
    assert allowed_hosts("10.1.2.3", 8443, scheme="https").origins == {"https://10.1.2.3:8443"}
