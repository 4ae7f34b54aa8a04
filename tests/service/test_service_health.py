"""Health and readiness of ``ipybox serve``, and a config MCP server that cannot start: with
``--require-servers`` the start fails with one line; without it readiness says not ready and the
model is told that the server is not available (not a bare ``ModuleNotFoundError``)."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
from service_kit import TOKEN, Service, serve_command, start_service

from ipybox_core.executor import ExecutionResult
from ipybox_core.remote import RemoteSessions

MISSING = "/nonexistent/ipybox-test/shop-server"
BROKEN = {"shop": {"command": MISSING}}


def _probe(service: Service, path: str) -> httpx.Response:
    return httpx.get(service.url.removesuffix("/mcp") + path, timeout=10)


def _settled(service: Service, timeout: float = 120.0) -> httpx.Response:
    """``/readyz`` once the service has finished starting (ready, or not ready for good)."""
    deadline = time.monotonic() + timeout
    while True:
        answer = _probe(service, "/readyz")
        if answer.json().get("reason") != "starting" or time.monotonic() > deadline:
            return answer
        time.sleep(0.1)


def test_a_healthy_service_is_live_and_becomes_ready_without_a_token(service: Service) -> None:
    live = _probe(service, "/healthz")
    assert (live.status_code, live.json()) == (200, {"status": "live"})
    ready = _settled(service)
    assert (ready.status_code, ready.json()) == (200, {"status": "ready"})
    refused = httpx.post(service.url, json={}, timeout=10)
    assert refused.status_code == 401, "only the probes answer without the token"


async def test_a_server_that_cannot_start_makes_the_service_not_ready_and_the_model_is_told(
    tmp_path: Path,
) -> None:
    service = start_service(tmp_path / "ws", servers=BROKEN)
    try:
        ready = _settled(service)
        body: dict[str, Any] = ready.json()
        assert ready.status_code == 503 and body["status"] == "not ready"
        assert list(body["failed_servers"]) == ["shop"] and MISSING in body["failed_servers"]["shop"]
        assert _probe(service, "/healthz").status_code == 200, "still live: the test server works"
        async with RemoteSessions(service.url, token=service.token, client_name="app") as sessions:
            assert "MCP server 'shop' is not available: " in sessions.api_reference()
            executor = (await sessions.session("shop")).executor
            result = await executor.stream("from mcptools.shop import list_products").next_stop()
            assert isinstance(result, ExecutionResult) and result.error is not None
            assert result.error.evalue.startswith("MCP server 'shop' is not available: cannot connect")
            assert "MCP server 'shop' is not available" in result.to_text()
    finally:
        assert service.stop() == 0
    log = service.log.read_text()
    assert "ipybox: warning: MCP server 'shop' from the config file failed to start" in log
    assert "ipybox: warning: ipybox:" not in log


def test_require_servers_ends_the_start_with_one_line_naming_the_server_and_the_cause(
    tmp_path: Path,
) -> None:
    started = subprocess.run(
        serve_command(tmp_path / "ws", "--require-servers", servers=BROKEN),
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "IPYBOX_MCP_TOKEN": TOKEN},
        check=False,
    )
    assert started.returncode == 3, started.stderr
    errors = [line for line in started.stderr.splitlines() if line.startswith("ipybox: error:")]
    assert len(errors) == 1, started.stderr
    assert errors[0].startswith("ipybox: error: MCP server 'shop' from the config file failed to start: ")
    assert MISSING in errors[0] and "Traceback" not in started.stderr
    assert "listening on" not in started.stderr
