"""``ipybox serve`` as a real process, and framework application processes that use it.

The application processes (:func:`run_app`, :func:`start_app`) are forked from one fork server per
test session (:class:`AppServer`), which has imported each app and its framework once: each is a
process of its own (its pid, pipes, environment; killed by a signal, it dies), started without the
1-3 s of CPU a framework import costs. An app without ``run(argv)`` is started with ``python``.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from servers import PYTHON, SERVE_SCRIPT

TEST_SERVER = {"command": PYTHON, "args": [str(SERVE_SCRIPT), "stdio"], "env": {"PYTHONUNBUFFERED": "1"}}
TOKEN = "service-test-token-0123456789abcdef"
APPS = Path(__file__).parent
CONVERSATION_ENV = "SERVICE_TEST_CONVERSATION"
"""The conversation key of the test that starts an application process (see ``conftest.py``)."""


def conversation_key(default: str) -> str:
    """In an application process: the conversation of the test that started it (``default`` outside one)."""
    return os.environ.get(CONVERSATION_ENV, default)


def counting_steps(conversation: str) -> list[str]:
    """An app's scripted model's code: a variable, then ``count()`` of ``conversation`` printed with it."""
    return [
        "state = 'kept'",
        f"from mcptools.test import count\nprint('count', count(tag={conversation!r}), state)",
    ]


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


class AppProcess:
    """An application process forked by the :class:`AppServer`: what ``subprocess.Popen(text=True)``
    with pipes gives a test (``stdin`` only if asked for), for a process that is not this one's child."""

    def __init__(self, server: AppServer, args: list[str], pid: int, pipes: list[IO[str] | None]) -> None:
        self.server, self.args, self.pid = server, args, pid
        self.stdin, stdout, stderr = pipes
        assert stdout is not None and stderr is not None
        self.stdout: IO[str] = stdout
        self.stderr: IO[str] = stderr
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            self.returncode = self.server.exit_status(self.pid, 0)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            self.returncode = self.server.exit_status(self.pid, timeout)
            if self.returncode is None:
                raise subprocess.TimeoutExpired(self.args, timeout or 0)
        return self.returncode

    def send_signal(self, signum: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, signum)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def communicate(self, input: str | None = None, timeout: float | None = None) -> tuple[str, str]:
        """Write ``input`` to stdin and close it, read stdout and stderr to their ends, wait."""
        deadline = None if timeout is None else time.monotonic() + timeout
        if self.stdin is not None:
            with contextlib.suppress(BrokenPipeError):
                if input:
                    self.stdin.write(input)
                self.stdin.close()
        read: dict[str, str] = {}
        readers = [
            threading.Thread(
                target=lambda name=name, pipe=pipe: read.update({name: pipe.read()}), daemon=True
            )
            for name, pipe in (("out", self.stdout), ("err", self.stderr))
        ]
        for reader in readers:
            reader.start()
        for reader in readers:
            reader.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
            if reader.is_alive():
                raise subprocess.TimeoutExpired(self.args, timeout or 0)
        self.wait(None if deadline is None else max(0.0, deadline - time.monotonic()))
        for pipe in (self.stdout, self.stderr):
            pipe.close()
        return read["out"], read["err"]


def _pipe(fd: int, mode: str = "r") -> IO[str]:
    """Our end of a pipe to an application process (its :class:`AppProcess` closes it)."""
    return open(fd, mode, encoding="utf-8")


class AppServer:
    """The fork server (``app_forkserver.py``) of this test session, started on first use (and again
    if it died): :meth:`spawn` forks an application process from it."""

    def __init__(self) -> None:
        self.process: subprocess.Popen[bytes] | None = None
        self.channel: socket.socket | None = None
        self.log = Path(tempfile.gettempdir()) / f"ipybox-app-forkserver-{os.getpid()}.log"
        self.ids = itertools.count()
        self.changed = threading.Condition()
        self.replies: dict[int, dict[str, Any]] = {}
        self.exits: dict[int, int] = {}
        self.lock = threading.Lock()

    def spawn(
        self, app: str, args: list[str], env: dict[str, str], stdin: bool = False, timeout: float = 120.0
    ) -> AppProcess | None:
        """Fork ``python APP ARGS`` with ``env``; None if the app cannot be forked (no ``run()``)."""
        if "\nasync def run(argv: list[str]) -> None:" not in (APPS / app).read_text():
            return None  # not imported into the server: its top level is its own process's
        stdin_read, stdin_write = os.pipe() if stdin else (os.open(os.devnull, os.O_RDONLY), None)
        (stdout_read, stdout_write), (stderr_read, stderr_write) = os.pipe(), os.pipe()
        with self.lock:
            channel, number = self._running(), next(self.ids)
            command = {"id": number, "app": app, "args": args, "env": env, "cwd": os.getcwd()}
            socket.send_fds(channel, [json.dumps(command).encode()], [stdin_read, stdout_write, stderr_write])
        for fd in (stdin_read, stdout_write, stderr_write):
            os.close(fd)
        with self.changed:
            self.changed.wait_for(lambda: number in self.replies or self.process is None, timeout)
            reply = self.replies.pop(number, {"error": "no answer"})
        pipes = [
            None if stdin_write is None else _pipe(stdin_write, "w"),
            _pipe(stdout_read),
            _pipe(stderr_read),
        ]
        if "error" in reply:
            for pipe in pipes:
                if pipe is not None:
                    pipe.close()
            return None
        return AppProcess(self, [sys.executable, str(APPS / app), *args], reply["pid"], pipes)

    def exit_status(self, pid: int, timeout: float | None) -> int | None:
        """The exit status of process ``pid`` (``-N``: signal N), once it ended within ``timeout``."""
        with self.changed:
            self.changed.wait_for(lambda: pid in self.exits or self.process is None, timeout)
            if pid not in self.exits and self.process is None:
                raise RuntimeError(f"the fork server ended before process {pid}:\n{self.log.read_text()}")
            return self.exits.get(pid)

    def _running(self) -> socket.socket:
        if self.process is not None and self.channel is not None and self.process.poll() is None:
            return self.channel
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, str(APPS / "app_forkserver.py"), str(theirs.fileno())],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                pass_fds=[theirs.fileno()],
            )
        theirs.close()
        self.channel = ours
        threading.Thread(target=self._read, args=(self.process, ours), daemon=True).start()
        return ours

    def _read(self, process: subprocess.Popen[bytes], channel: socket.socket) -> None:
        while message := channel.recv(1 << 20):
            reply = json.loads(message)
            with self.changed:
                if "id" in reply:
                    self.replies[reply["id"]] = reply
                else:
                    self.exits[reply["pid"]] = reply["returncode"]
                self.changed.notify_all()
        with self.changed:
            if self.process is process:
                self.process = None
            self.changed.notify_all()

    def close(self, timeout: float = 30.0) -> int:
        """End the fork server (the socket's end); its exit status."""
        with self.lock:
            process, channel = self.process, self.channel
            self.channel = None
            if process is None or channel is None:
                return 0
            channel.shutdown(socket.SHUT_RDWR)
            channel.close()
            try:
                status = process.wait(timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                return process.wait()
        if status == 0 and not self.log.read_text():
            self.log.unlink()
        return status


Started = AppProcess | subprocess.Popen[str]
"""An application process as :func:`start_app` starts it: forked, or with ``python``."""

APP_SERVER = AppServer()
"""The fork server of this test session (``conftest.py`` ends it)."""


def start_app(app: str, *args: str, token: str = TOKEN, stdin: bool = False) -> Started:
    """Start the application script ``app`` (in this folder); read its stdout line by line (and, with
    ``stdin``, write to its stdin)."""
    env = {**os.environ, "IPYBOX_MCP_TOKEN": token}
    forked = APP_SERVER.spawn(app, list(args), env, stdin=stdin)
    if forked is not None:
        return forked
    return subprocess.Popen(
        [sys.executable, str(APPS / app), *args],
        stdin=subprocess.PIPE if stdin else None,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def run_app(
    app: str, *args: str, token: str = TOKEN, timeout: float = 120.0
) -> subprocess.CompletedProcess[str]:
    """Run the application script ``app`` (in this folder) to its end; its output is returned."""
    process = start_app(app, *args, token=token)
    try:
        out, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        raise
    return subprocess.CompletedProcess(process.args, process.wait(), out, err)


def killed_while_waiting(app: str, service: Service, state: Path, line: str) -> str:
    """Process A runs ``app start`` until it prints ``line`` (its run waits for an approval) and is
    SIGKILLed there; returns that line."""
    holder = start_app(app, "start", service.url, str(state), "hold")
    printed = wait_for_line(holder, line)
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    return printed


def wait_for_line(process: Started, prefix: str, timeout: float = 120.0) -> str:
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
