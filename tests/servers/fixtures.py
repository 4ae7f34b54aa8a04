"""Pytest fixtures for the real MCP test servers (register with ``pytest_plugins = ["servers.fixtures"]``).

- ``stdio_server_config``: config dict launching the MCPServer test server over stdio
- ``raw_server_config``: config dict launching the off-spec, fast-starting raw stdio server
- ``clean_raw_server_config``: the same raw server listing only its well-formed tools
- ``http_test_server`` (session): one process serving Streamable HTTP (``http_server_url``) and SSE
  (``sse_server_url``) on a free loopback port
- ``http_server_factory``: start extra HTTP/SSE server processes (to kill them); all are killed at
  teardown
- ``everything_stdio_config``: the npm ``@modelcontextprotocol/server-everything`` over stdio
  (skipped, or failed in strict mode, when node or the npm package is missing)
"""

from __future__ import annotations

import os
import select
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from prerequisites import NODE_MODULES, require
from servers import PYTHON, RAW_SERVER_SCRIPT, SERVE_SCRIPT
from servers.gateway import LocalGateway, kernelgateway_available, start_local_gateway

EVERYTHING_SERVER = NODE_MODULES / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"
START_TIMEOUT = 60.0


@dataclass
class HttpTestServer:
    """A running test server process serving Streamable HTTP on ``/mcp`` and SSE on ``/sse``."""

    process: subprocess.Popen[str]
    port: int
    log: Path

    @property
    def url(self) -> str:
        """The Streamable HTTP endpoint."""
        return f"http://127.0.0.1:{self.port}/mcp"

    @property
    def sse_url(self) -> str:
        """The SSE endpoint."""
        return f"http://127.0.0.1:{self.port}/sse"

    def kill(self) -> None:
        """SIGKILL the server and reap it."""
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(timeout=10)

    def stop(self) -> None:
        """Terminate the server (SIGKILL if it does not exit within 5 s)."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.kill()
        if self.process.stdout is not None:
            self.process.stdout.close()


def start_http_test_server(log: Path, name: str = "ipybox-test-http", port: int = 0) -> HttpTestServer:
    """Start ``serve.py http`` and wait until it listens (it prints ``PORT <n>`` after ``listen()``)."""
    with log.open("a") as stderr:
        process = subprocess.Popen(
            [PYTHON, str(SERVE_SCRIPT), "http", name, str(port)],
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
    assert process.stdout is not None
    deadline = time.monotonic() + START_TIMEOUT
    line = ""
    while not line and time.monotonic() < deadline and process.poll() is None:
        readable, _, _ = select.select([process.stdout], [], [], 0.1)
        if readable:
            line = process.stdout.readline()
    if not line.startswith("PORT "):
        process.kill()
        process.wait()
        raise RuntimeError(f"HTTP test server did not start: {line!r}\n{log.read_text()}")
    return HttpTestServer(process=process, port=int(line.split()[1]), log=log)


@pytest.fixture
def stdio_server_config() -> dict[str, Any]:
    """Launch the MCPServer test server over stdio with the venv's Python."""
    return {"command": PYTHON, "args": [str(SERVE_SCRIPT), "stdio"], "env": {"PYTHONUNBUFFERED": "1"}}


@pytest.fixture
def raw_server_config() -> dict[str, Any]:
    """Launch the off-spec raw stdio server (paginated tools/list, malformed tools; starts fast)."""
    return {"command": PYTHON, "args": [str(RAW_SERVER_SCRIPT)]}


@pytest.fixture
def clean_raw_server_config() -> dict[str, Any]:
    """The raw stdio server listing only well-formed tools: a stdio server that starts in ~50 ms."""
    return {"command": PYTHON, "args": [str(RAW_SERVER_SCRIPT), "--clean"]}


@pytest.fixture(scope="session")
def http_test_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpTestServer]:
    """One shared HTTP + SSE test server for the whole session."""
    server = start_http_test_server(tmp_path_factory.mktemp("mcp-http") / "server.log")
    yield server
    server.stop()


@pytest.fixture(scope="session")
def http_server_url(http_test_server: HttpTestServer) -> str:
    """Streamable HTTP endpoint of the shared test server."""
    return http_test_server.url


@pytest.fixture(scope="session")
def sse_server_url(http_test_server: HttpTestServer) -> str:
    """SSE endpoint of the shared test server."""
    return http_test_server.sse_url


@pytest.fixture
def http_server_factory(tmp_path: Path) -> Iterator[Callable[..., HttpTestServer]]:
    """Start private HTTP + SSE server processes (e.g. to kill one); all are stopped at teardown.

    ``start(port=0)``: ``port`` 0 picks a free port; pass a killed server's port to restart it there.
    """
    started: list[HttpTestServer] = []

    def start(port: int = 0) -> HttpTestServer:
        server = start_http_test_server(tmp_path / f"server-{len(started)}.log", port=port)
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


@pytest.fixture
def everything_stdio_config() -> dict[str, Any]:
    """The reference npm server ``@modelcontextprotocol/server-everything`` over stdio."""
    node = shutil.which("node")
    require(node is not None, "node is not installed")
    require(EVERYTHING_SERVER.exists(), f"npm test servers are not installed ({EVERYTHING_SERVER})")
    return {"command": node, "args": [str(EVERYTHING_SERVER), "stdio"]}


@pytest.fixture(scope="session")
def kernel_gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalGateway]:
    """One real Jupyter Kernel Gateway (loopback, token) for the session; at the end it must run no
    kernel and leave no process behind."""
    require(
        kernelgateway_available(),
        "jupyter-kernel-gateway and websockets are not installed (pip install 'ipybox[gateway]')",
    )
    gateway = start_local_gateway(tmp_path_factory.mktemp("kernel-gateway"))
    try:
        yield gateway
        leftover = gateway.kernels()
    finally:
        survivors = gateway.stop()
    assert leftover == [], f"kernels left running on the gateway: {leftover}"
    assert survivors == set(), f"kernel processes survived the gateway: {survivors}"
