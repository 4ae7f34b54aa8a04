"""A host application that runs uvicorn itself keeps its logs when it starts a ``CodeExecutor``.

The application is a real uvicorn serving a small Starlette app in its own process; its lifespan
starts a ``CodeExecutor`` and one route runs code that calls an MCP tool (so the executor's tool
server handles a request). Its output must still show uvicorn's startup lines and its own access
line, and no line of the tool server's traffic. The control builds the tool server's uvicorn
config as ipybox once did (``log_level="warning"``, ``access_log=False``): uvicorn applies that to
the process-wide ``uvicorn.error``/``uvicorn.access`` loggers, and the application's lines vanish.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from servers import RAW_SERVER_SCRIPT

APP = r"""
import contextlib, sys
import uvicorn
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route
from ipybox_core import CodeExecutor

if sys.argv[4] == "old-config":  # the control: the tool server's config as it was
    import ipybox_core._http_listener as listener

    class OldConfig(uvicorn.Config):
        def __init__(self, app, **kwargs):
            kwargs.pop("log_config", None)
            super().__init__(app, **{**kwargs, "log_level": "warning", "access_log": False})

    listener.uvicorn = type("uvicorn", (), {"Config": OldConfig})

@contextlib.asynccontextmanager
async def lifespan(app):
    async with CodeExecutor(workspace=sys.argv[2], approval="never", timeout=60) as executor:
        await executor.register_mcp_server("raw", {"command": sys.executable, "args": [sys.argv[3], "--clean"]})
        app.state.executor = executor
        yield

async def run(request):
    result = await request.app.state.executor.execute("from mcptools.raw import echo\nprint(echo(text='hi'))")
    return PlainTextResponse(result.text)

app = Starlette(routes=[Route("/run", run)], lifespan=lifespan)
uvicorn.run(app, uds=sys.argv[1], log_level="info")
"""

STARTUP_LINES = ("Application startup complete", "Uvicorn running on unix socket")


def get(path: Path, target: str) -> bytes:
    """One ``GET`` over the unix socket ``path``; the whole response."""
    with socket.socket(socket.AF_UNIX) as sock:
        sock.settimeout(120)
        sock.connect(str(path))
        sock.sendall(f"GET {target} HTTP/1.1\r\nHost: app\r\nConnection: close\r\n\r\n".encode())
        answer = b""
        while data := sock.recv(65536):
            answer += data
    return answer


def run_application(tmp_path: Path, config: str) -> str:
    """Start the application, wait until it serves, call ``/run`` once, stop it; its output."""
    uds, log = tmp_path / "app.sock", tmp_path / f"{config}.log"
    workspace = tmp_path / f"ws-{config}"
    workspace.mkdir()
    with log.open("wb") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-c", APP, str(uds), str(workspace), str(RAW_SERVER_SCRIPT), config],
            stdin=subprocess.DEVNULL,
            stdout=stderr,  # uvicorn's access log goes to stdout
            stderr=stderr,
        )
    try:
        deadline = time.monotonic() + 120
        answer = b""
        while time.monotonic() < deadline and process.poll() is None:
            try:
                answer = get(uds, "/run")
                break
            except (FileNotFoundError, ConnectionRefusedError):
                time.sleep(0.1)
        assert b" 200 " in answer.split(b"\r\n")[0] and answer.endswith(b"hi\n"), (answer, log.read_text())
    finally:
        process.terminate()
        process.wait(60)
    return log.read_text()


@pytest.mark.parametrize("config", ["current", "old-config"])
def test_the_applications_uvicorn_logs_survive_a_code_executor(tmp_path: Path, config: str) -> None:
    output = run_application(tmp_path, config)
    lines = output.splitlines()
    startup = [name for name in STARTUP_LINES if any(name in line for line in lines)]
    access = [line for line in lines if '"GET /run HTTP/1.1" 200' in line]
    if config == "current":
        assert startup == list(STARTUP_LINES), output
        assert len(access) == 1, output
        assert not [line for line in lines if "/call" in line], "the tool server's traffic reached the log"
        assert not [line for line in lines if "Started server process" in line][1:], "one uvicorn: the app's"
    else:  # the control: the old config silences the application
        assert startup == [] and access == [], output
