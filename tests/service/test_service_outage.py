"""An outage of ``ipybox serve`` under a real Starlette app with two uvicorn worker processes: the
workers wait for a service started after them, a request during the outage gets ``ServiceError``
(the worker's lifespan is not cancelled), and the workers serve again once the service is back,
without a restart."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
from service_kit import APPS, TOKEN, start_service

UVICORN = (sys.executable, "-m", "uvicorn", "outage_app:app", "--workers", "2", "--host", "127.0.0.1")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _get(app: str, conversation: str, timeout: float = 120.0) -> httpx.Response:
    """``GET /run``, waiting for the app's socket (its workers start before the service)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return httpx.get(f"{app}/run", params={"conversation": conversation}, timeout=timeout)
        except httpx.TransportError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def test_an_outage_is_a_service_error_for_the_request_and_the_workers_recover(
    tmp_path: Path, conversation: str
) -> None:
    port, app_port = _free_port(), _free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    app_log = tmp_path / "app.log"
    with app_log.open("wb") as log:
        workers = subprocess.Popen(
            [*UVICORN, "--app-dir", str(APPS), "--port", str(app_port)],
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "OUTAGE_SERVICE_URL": url, "IPYBOX_MCP_TOKEN": TOKEN},
        )
    app = f"http://127.0.0.1:{app_port}"
    service = start_service(tmp_path / "ws", "--port", str(port))  # after the workers
    try:
        first = _get(app, conversation)
        assert (first.status_code, first.json()["text"]) == (200, "42"), first.text
        assert service.stop() == 0
        during = [_get(app, conversation) for _ in range(4)]  # whichever workers take them
        assert [answer.status_code for answer in during] == [503] * 4, [a.text for a in during]
        assert all(answer.json()["error"] == "ServiceError" for answer in during)
        assert workers.poll() is None, "the workers keep serving"
        service = start_service(tmp_path / "ws", "--port", str(port))
        after = [_get(app, conversation) for _ in range(6)]
        assert [(a.status_code, a.json().get("text")) for a in after] == [(200, "42")] * 6, [
            a.text for a in after
        ]
    finally:
        service.stop()
        workers.send_signal(signal.SIGTERM)
        workers.wait(60)
    output = app_log.read_text()
    assert "CancelledError" not in output and "Traceback" not in output, output
    assert output.count("Application shutdown complete") == 2, output
