"""``ipybox serve`` as a real process, and framework application processes that use it."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from servers import PYTHON, SERVE_SCRIPT

TEST_SERVER = {"command": PYTHON, "args": [str(SERVE_SCRIPT), "stdio"], "env": {"PYTHONUNBUFFERED": "1"}}
TOKEN = "service-test-token-0123456789abcdef"
APPS = Path(__file__).parent
CONVERSATION_ENV = "SERVICE_TEST_CONVERSATION"
"""The conversation key of the test that starts an application process (see ``conftest.py``)."""


def conversation_key(default: str) -> str:
    """In an application process: the conversation of the test that started it (``default`` outside one)."""
    return os.environ.get(CONVERSATION_ENV, default)


def count_code(conversation: str) -> str:
    """Code calling the test server's ``count`` for ``conversation`` (its own counter)."""
    return f"from mcptools.test import count\nprint('count', count(tag={conversation!r}))"


@dataclass
class Service:
    """A running ``ipybox serve``: its URL, its token and its stderr log."""

    process: subprocess.Popen[bytes]
    url: str
    token: str
    log: Path

    def stop(self, signum: int = signal.SIGTERM, timeout: float = 30.0) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signum)
            try:
                return self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
        return self.process.wait()


def serve_command(workspace: Path, *args: str, servers: dict[str, object] | None = None) -> list[str]:
    """``ipybox serve`` on a free loopback port with the test MCP server (and ``servers``)."""
    workspace.mkdir(parents=True, exist_ok=True)
    config = workspace.parent / f"{workspace.name}-mcp.json"
    config.write_text(json.dumps({"mcpServers": {"test": TEST_SERVER, **(servers or {})}}))
    command = [sys.executable, "-m", "ipybox_core.cli", "serve", "--workspace", str(workspace)]
    return [*command, "--config", str(config), "--port", "0", *args]


def start_service(
    workspace: Path, *args: str, timeout: float = 60.0, servers: dict[str, object] | None = None
) -> Service:
    """``ipybox serve`` on a free loopback port with the test MCP server and a fixed token."""
    command = serve_command(workspace, *args, servers=servers)
    log = workspace.parent / f"{workspace.name}-{time.monotonic_ns()}.log"
    with log.open("wb") as stderr:
        process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            env={**os.environ, "IPYBOX_MCP_TOKEN": TOKEN},
        )
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and process.poll() is None:
        match = re.search(r"listening on (http://\S+)", log.read_text())
        if match:
            return Service(process, match.group(1), TOKEN, log)
        time.sleep(0.05)
    process.kill()
    process.wait()
    raise RuntimeError(f"ipybox serve did not start:\n{log.read_text()}")


def run_app(
    app: str, *args: str, token: str = TOKEN, timeout: float = 120.0
) -> subprocess.CompletedProcess[str]:
    """Run the application script ``app`` (in this folder) to its end; its output is returned."""
    return subprocess.run(
        [sys.executable, str(APPS / app), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "IPYBOX_MCP_TOKEN": token},
        check=False,
    )


def start_app(app: str, *args: str, token: str = TOKEN) -> subprocess.Popen[str]:
    """Start the application script ``app``; read its stdout line by line."""
    return subprocess.Popen(
        [sys.executable, str(APPS / app), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "IPYBOX_MCP_TOKEN": token},
    )


def killed_while_waiting(app: str, service: Service, state: Path, line: str) -> str:
    """Process A runs ``app start`` until it prints ``line`` (its run waits for an approval) and is
    SIGKILLed there; returns that line."""
    holder = start_app(app, "start", service.url, str(state), "hold")
    printed = wait_for_line(holder, line)
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    return printed


def wait_for_line(process: subprocess.Popen[str], prefix: str, timeout: float = 120.0) -> str:
    """The first stdout line of ``process`` starting with ``prefix``."""
    assert process.stdout is not None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            break
        if line.startswith(prefix):
            return line.rstrip("\n")
    process.kill()
    _, err = process.communicate()
    raise AssertionError(f"no {prefix!r} line from the application:\n{err}")


ABANDONED = "the earlier execute_code call was abandoned without a decision"


async def count_now(service: Service, conversation: str, abandoned_call: str) -> str:
    """In a third process's role: the call ``abandoned_call`` no longer waits in ``conversation``,
    and the test server's ``count()``, approved now, returns 1 if the abandoned call never ran."""
    from ipybox_core.approval import ApprovalRequest
    from ipybox_core.remote import RemoteSessions

    async with RemoteSessions(service.url, token=service.token, client_name="checker") as sessions:
        executor = (await sessions.session(conversation)).executor
        assert await executor.reattach(abandoned_call) is None
        execution = executor.stream(count_code(conversation))
        request = await execution.next_stop()
        assert isinstance(request, ApprovalRequest), request
        await request.accept()
        return (await execution.wait()).text.strip()
