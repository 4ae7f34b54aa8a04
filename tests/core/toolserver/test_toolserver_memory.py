"""What waiting and running calls cost the application stays in proportion to the request limit.

A hostile kernel sends the largest bodies the tool server reads (just under its limit, 1 MiB here to
keep the parses short; 4 MiB by default) shaped to parse into the costliest objects (``{"a":{}}`` repeated: ~28 times the bytes as Python objects). The
application is a separate process (``APP``) whose resident set is measured through /proc, with a
real tool server on its real unix socket. Each attack has a control that runs the same bodies
through the old, eager handling (a parsed tree kept per call) and exceeds the bound by far.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

MiB = 1024 * 1024
LIMIT = MiB  # the tool server's max_request_bytes here (4 MiB by default: the same proportions)

APP = r"""
import asyncio, contextlib, ctypes, gc, json, sys
from dataclasses import dataclass, field
from pathlib import Path
from ipybox_core.approval import ApprovalDecision, ApprovalGate
from ipybox_core.mcp.types import ToolInfo
from ipybox_core.toolserver import ToolServer
from ipybox_core.toolserver._parse_budget import ParseBudget

@dataclass
class Outcome:
    structured: object = None
    content: list = field(default_factory=list)
    notices: tuple = ()

class Backend:
    def __init__(self):
        self.release = asyncio.Event()
        self.running = 0
    def tool(self, server, tool):
        return ToolInfo(name=tool)
    async def call(self, server, tool, arguments):
        self.running += 1
        try:
            if arguments.get("rows"):
                await self.release.wait()
            return Outcome(structured={"rows": len(arguments.get("rows", ()))})
        finally:
            self.running -= 1

def rss():
    # resident bytes of what is alive: freed memory the allocator kept is handed back first
    ctypes.CDLL("libc.so.6").malloc_trim(0)
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024

async def main():
    mode = sys.argv[2]
    backend = Backend()
    waiting, kept, decided = [], [], [0]
    if mode.startswith("pending"):
        gate = ApprovalGate("always")
        def listener(request):
            if request.tool == "ping":  # the warm-up call
                return request.resolve(ApprovalDecision(True, "user"))
            waiting.append(request)
            if mode == "pending-eager":  # the old handling: every waiting call held its parsed tree
                kept.append(request.args)
        gate.listen(listener)
    else:
        def policy(request):
            decided[0] += 1
            return True
        gate = ApprovalGate(policy)
        if mode == "running-eager":  # the old handling: every running call parsed at once
            ParseBudget.hold = lambda self, size: contextlib.nullcontext()  # async with works on it
    server = ToolServer(backend, gate, max_request_bytes=int(sys.argv[3]))
    await server.start_unix(Path(sys.argv[1]) / "tools.sock")
    gc.disable()  # parsed JSON has no cycles: the collector would only slow the parses down
    print(json.dumps([server.address, server.token]), flush=True)
    loop = asyncio.get_running_loop()
    while line := await loop.run_in_executor(None, sys.stdin.readline):
        if line.strip() == "measure":
            state = {"waiting": gate.waiting, "decided": decided[0], "running": backend.running,
                     "rss": rss(), "blocks": sys.getallocatedblocks()}
            print(json.dumps(state), flush=True)
        elif line.strip() == "finish":
            for request in waiting:
                if request.pending:
                    request.resolve(ApprovalDecision(False, "user", "finished by the test"))
            backend.release.set()
            print("{}", flush=True)

asyncio.run(main())
"""


@dataclass
class App:
    """The application process: one tool server, commands on stdin, answers on stdout."""

    process: subprocess.Popen[str]
    path: str
    token: str

    def ask(self, command: str) -> dict[str, Any]:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(command + "\n")
        self.process.stdin.flush()
        answer: dict[str, Any] = json.loads(self.process.stdout.readline())
        return answer

    def wait_for(self, done: Callable[[dict[str, Any]], bool], timeout: float = 300) -> dict[str, Any]:
        """Measure until ``done(state)`` (the event itself, not a fixed time)."""
        deadline = time.monotonic() + timeout
        while True:
            state = self.ask("measure")
            if done(state):
                return state
            assert time.monotonic() < deadline, f"the application never got there: {state}"
            time.sleep(0.2)


@pytest.fixture
def start_app(tmp_path: Path) -> Iterator[Callable[[str], App]]:
    started: list[subprocess.Popen[str]] = []

    def start(mode: str) -> App:
        process = subprocess.Popen(
            [sys.executable, "-c", APP, str(tmp_path), mode, str(LIMIT)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        started.append(process)
        assert process.stdout is not None
        address, token = json.loads(process.stdout.readline())
        return App(process, address.removeprefix("unix:"), token)

    yield start
    for process in started:
        process.kill()
        process.wait()


def costly_body() -> bytes:
    """A call body just under the limit whose arguments parse into ~28x its bytes of objects."""
    head, tail = b'{"server":"demo","tool":"echo","arguments":{"rows":[', b"]}}"
    item = b'{"a":{}}'
    count = (LIMIT - len(head) - len(tail) + 1) // (len(item) + 1)
    return head + b",".join([item] * count) + tail


def send_call(path: str, token: str, body: bytes) -> socket.socket:
    """A kernel's call: the whole body sent, the connection left open for the answer."""
    sock = socket.socket(socket.AF_UNIX)
    sock.connect(path)
    head = (
        f"POST /call HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAuthorization: Bearer {token}\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    )
    sock.sendall(head.encode() + body)
    return sock


def answer_line(sock: socket.socket) -> dict[str, Any]:
    """The call's final JSON line (after any heartbeats), read until the server hangs up."""
    sock.settimeout(120)
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    sock.close()
    lines = [line for line in data.partition(b"\r\n\r\n")[2].splitlines() if line.startswith(b"{")]
    answer: dict[str, Any] = json.loads(lines[-1])
    return answer


def small_call(app: App) -> dict[str, Any]:
    return answer_line(send_call(app.path, app.token, b'{"server":"demo","tool":"ping","arguments":{}}'))


@dataclass(frozen=True)
class Growth:
    """What an attack added to the application: resident bytes and Python objects, per byte sent."""

    rss: float  # resident bytes per byte sent
    objects: float  # allocated Python objects per KiB sent

    def __str__(self) -> str:
        return f"{self.rss:.1f}x the bytes sent, {self.objects:.1f} objects per KiB sent"


def growth(before: dict[str, Any], after: dict[str, Any], sent: int) -> Growth:
    return Growth((after["rss"] - before["rss"]) / sent, (after["blocks"] - before["blocks"]) / (sent / 1024))


# --- calls waiting for approval --------------------------------------------------------------------

PENDING = 16  # the most a gate lets wait at once


def pending_growth(app: App, body: bytes) -> tuple[Growth, list[socket.socket]]:
    assert small_call(app) == {"ok": True, "result": {"structured": {"rows": 0}, "content": []}}
    before = app.ask("measure")
    socks = [send_call(app.path, app.token, body) for _ in range(PENDING)]
    after = app.wait_for(lambda state: state["waiting"] == PENDING)
    return growth(before, after, PENDING * len(body)), socks


def test_waiting_calls_hold_their_bytes_not_a_parsed_tree(start_app: Callable[[str], App]) -> None:
    body = costly_body()
    # The bytes plus what allocators keep after the parses that checked them (~5x here), and
    # hardly any objects: a parsed body is ~340 objects per KiB.
    rss_bound, objects_bound = 12, 8

    app = start_app("pending")
    held, socks = pending_growth(app, body)
    assert held.rss < rss_bound and held.objects < objects_bound, f"{PENDING} waiting calls: {held}"
    # One more than the limit of waiting requests is refused at once, with a line that says why.
    over = answer_line(send_call(app.path, app.token, body))
    assert over["error"]["type"] == "unavailable"
    assert "at most 16 waiting for a decision (max_pending)" in over["error"]["message"]
    app.ask("finish")
    assert all(answer_line(sock)["error"]["type"] == "rejected" for sock in socks)
    # the limit counts waiting requests only: once they are decided, calls go through again
    assert small_call(app)["ok"] is True

    # Control: the old handling (each waiting call keeps its parsed arguments) exceeds the bounds by far.
    eager = start_app("pending-eager")
    held_eagerly, socks = pending_growth(eager, body)
    assert held_eagerly.rss > rss_bound and held_eagerly.objects > 20 * objects_bound, str(held_eagerly)
    eager.ask("finish")
    for sock in socks:
        sock.close()


# --- calls that run ---------------------------------------------------------------------------------

RUNNING = 16


def running_growth(app: App, body: bytes, running: int) -> tuple[Growth, list[socket.socket]]:
    assert small_call(app)["ok"] is True
    before = app.ask("measure")
    socks = [send_call(app.path, app.token, body) for _ in range(RUNNING)]
    after = app.wait_for(lambda state: state["decided"] == RUNNING + 1 and state["running"] == running)
    return growth(before, after, RUNNING * len(body)), socks


def test_running_calls_parse_their_arguments_within_a_budget(start_app: Callable[[str], App]) -> None:
    body = costly_body()
    # One call's arguments parsed at a time (~28x its bytes, 1/16 of what was sent), the others'
    # bytes, what allocators keep: ~8x here. Every call parsed at once: ~30x, 340 objects per KiB.
    rss_bound, objects_bound = 16, 64

    app = start_app("running")
    held, socks = running_growth(app, body, running=1)  # the others wait, holding their bytes
    assert held.rss < rss_bound and held.objects < objects_bound, f"{RUNNING} running calls: {held}"
    app.ask("finish")
    answers = [answer_line(sock) for sock in socks]
    assert all(answer["ok"] and answer["result"]["structured"]["rows"] > 100_000 for answer in answers)

    # Control: without the budget every running call holds its parsed arguments at once.
    eager = start_app("running-eager")
    held_eagerly, socks = running_growth(eager, body, running=RUNNING)
    assert held_eagerly.rss > rss_bound and held_eagerly.objects > 4 * objects_bound, str(held_eagerly)
    eager.ask("finish")
    for sock in socks:
        sock.close()
