"""The tool server bounds what a hostile kernel can cost the application.

Every attack runs against a real tool server on its real unix socket, next to a control that shows
the legitimate case still working: a body just under the size limit, JSON just within the depth
limit, a call from another tool server during a connection flood, a call that waits for approval
longer than the idle timeout. Memory and file descriptors are measured on a separate application
process (``APP``), so the test's own buffers and sockets do not count.
"""

from __future__ import annotations

import asyncio
import json
import os
import select
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from ipybox_core import runtime
from ipybox_core.approval import ApprovalGate, ApprovalRequest
from ipybox_core.mcp.types import ToolInfo
from ipybox_core.toolserver import ToolServer

MiB = 1024 * 1024

# The application: two tool servers ("a" and "b", as for two executors) in one process, with the
# limits given as JSON in argv[2]; it prints their addresses and tokens, then serves until stdin closes.
APP = r"""
import asyncio, json, resource, sys
from dataclasses import dataclass, field
from pathlib import Path
from ipybox_core.approval import ApprovalGate
from ipybox_core.mcp.types import ToolInfo
from ipybox_core.toolserver import ToolServer

@dataclass
class Outcome:
    structured: object = None
    content: list = field(default_factory=list)
    notices: tuple = ()

class Backend:
    def tool(self, server, tool):
        return ToolInfo(name=tool)
    async def call(self, server, tool, arguments):
        return Outcome(structured={"size": len(json.dumps(arguments))})

async def main():
    resource.setrlimit(resource.RLIMIT_NOFILE, (256, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
    limits = json.loads(sys.argv[2])
    servers = {}
    for name in ("a", "b"):
        server = ToolServer(Backend(), ApprovalGate("never"), **limits)
        await server.start_unix(Path(sys.argv[1]) / f"{name}.sock")
        servers[name] = [server.address, server.token]
    print(json.dumps(servers), flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)

asyncio.run(main())
"""


@dataclass
class App:
    """The application process and its two tool servers."""

    process: subprocess.Popen[str]
    servers: dict[str, tuple[str, str]]

    def path(self, name: str) -> str:
        return self.servers[name][0].removeprefix("unix:")

    def token(self, name: str) -> str:
        return self.servers[name][1]

    def open_fds(self) -> int:
        return len(os.listdir(f"/proc/{self.process.pid}/fd"))

    def peak_rss(self) -> int:
        """The process's high-water resident set size (VmHWM), in bytes."""
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
        raise AssertionError("no VmHWM in /proc/<pid>/status")

    def call(self, name: str, arguments: dict[str, Any]) -> runtime.ToolResponse:
        """A call through the kernel-side runtime, as generated code makes it."""
        os.environ["IPYBOX_TOOL_SERVER"], os.environ["IPYBOX_TOOL_TOKEN"] = self.servers[name]
        try:
            return runtime.call_tool("demo", "echo", arguments)
        finally:
            runtime._drop_connection()


@pytest.fixture
def start_app(tmp_path: Path) -> Iterator[Callable[..., App]]:
    started: list[subprocess.Popen[str]] = []

    def start(**limits: Any) -> App:
        process = subprocess.Popen(
            [sys.executable, "-c", APP, str(tmp_path), json.dumps(limits)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        started.append(process)
        assert process.stdout is not None
        servers = json.loads(process.stdout.readline())
        return App(process, {name: (address, token) for name, (address, token) in servers.items()})

    yield start
    for process in started:
        process.kill()
        process.wait()
    os.environ.pop("IPYBOX_TOOL_SERVER", None)
    os.environ.pop("IPYBOX_TOOL_TOKEN", None)


def exchange(path: str, head: str, chunks: Iterable[bytes] = ()) -> tuple[int, dict[str, Any]]:
    """Send ``head`` and then ``chunks`` (until the server hangs up); the status and final JSON line."""
    sock = socket.socket(socket.AF_UNIX)
    sock.connect(path)
    try:
        try:
            sock.sendall(head.encode())
            for chunk in chunks:
                sock.sendall(chunk)
        except (BrokenPipeError, ConnectionResetError):
            pass  # refused mid-body: the answer was sent before the server hung up
        sock.settimeout(30)
        answer = b""
        try:
            while data := sock.recv(65536):
                answer += data
        except ConnectionResetError:
            pass  # the server closed with our unread bytes in its buffer, after its answer
    finally:
        sock.close()
    status = int(answer.split(b" ", 2)[1])
    body = answer.partition(b"\r\n\r\n")[2]
    [line] = [line for line in body.splitlines() if line.startswith(b"{")]  # (streamed answers are chunked)
    return status, json.loads(line)


def post_head(token: str, length: int | None) -> str:
    framing = f"Content-Length: {length}" if length is not None else "Transfer-Encoding: chunked"
    auth = f"Authorization: Bearer {token}"
    return f"POST /call HTTP/1.1\r\nHost: x\r\nConnection: close\r\n{auth}\r\n{framing}\r\n\r\n"


def json_chunks(total: int, chunked: bool) -> Iterator[bytes]:
    """``total`` bytes of a JSON body sent 64 KiB at a time (the same buffer: the sender stays small)."""
    piece = b"x" * (64 * 1024)
    for start in range(0, total, len(piece)):
        data = piece[: min(len(piece), total - start)]
        yield b"%x\r\n%s\r\n" % (len(data), data) if chunked else data


# --- request-body limit ---------------------------------------------------------------------------


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_oversize_body_is_refused_without_being_read(start_app: Callable[..., App], chunked: bool) -> None:
    app = start_app(max_request_bytes=1 * MiB)
    # control: a call just under the limit goes through (and warms up the application)
    blob = "y" * (MiB - 1000)
    assert app.call("a", {"blob": blob}).structured == {"size": len(json.dumps({"blob": blob}))}
    before = app.peak_rss()

    attack = 64 * MiB
    status, answer = exchange(
        app.path("a"), post_head(app.token("a"), None if chunked else attack), json_chunks(attack, chunked)
    )
    assert status == 413
    assert answer["error"]["type"] == "bad_request"
    assert f"at most {MiB} bytes" in answer["error"]["message"]
    grown = app.peak_rss() - before
    assert grown < 16 * MiB, f"a refused {attack >> 20} MiB body grew the application by {grown >> 20} MiB"
    # the server is unharmed
    assert app.call("a", {"n": 1}).structured == {"size": 8}


def test_oversize_body_costs_nothing_before_the_token_check_or_the_tool_lookup(
    start_app: Callable[..., App],
) -> None:
    app = start_app(max_request_bytes=1 * MiB)
    app.call("a", {})
    before = app.peak_rss()
    attack = 64 * MiB
    status, answer = exchange(app.path("a"), post_head("guess", attack), json_chunks(attack, False))
    assert (status, answer["error"]["type"]) == (401, "unauthorized")
    # an unknown MCP server: the body is refused before it is read far enough to look the name up
    start = b'{"server": "nowhere", "tool": "x", "arguments": {"s": "'
    chunks = (b"%x\r\n%s\r\n" % (len(c), c) for c in [start, *json_chunks(attack, False)])
    status, answer = exchange(app.path("a"), post_head(app.token("a"), None), chunks)
    assert (status, answer["error"]["type"]) == (413, "bad_request")
    grown = app.peak_rss() - before
    assert grown < 16 * MiB, f"refused bodies grew the application by {grown >> 20} MiB"


async def test_kernel_sees_a_clear_error_naming_the_limit(tmp_path: Path) -> None:
    server = ToolServer(EchoBackend(), ApprovalGate("never"), max_request_bytes=256 * 1024)
    await server.start_unix(tmp_path / "tools.sock")
    os.environ["IPYBOX_TOOL_SERVER"], os.environ["IPYBOX_TOOL_TOKEN"] = server.address, server.token
    try:

        def calls() -> None:
            assert runtime.call_tool("demo", "echo", {"s": "a" * 200_000}).structured == {"depth": 2}
            with pytest.raises(ValueError, match=r"at most 262144 bytes .*\(max_request_bytes\)"):
                runtime.call_tool("demo", "echo", {"s": "a" * 4 * MiB})
            assert runtime.call_tool("demo", "echo", {"s": "b"}).structured == {"depth": 2}

        await asyncio.to_thread(calls)
    finally:
        runtime._drop_connection()
        await server.aclose()


# --- JSON depth limit -----------------------------------------------------------------------------


@dataclass
class Outcome:
    structured: Any = None
    content: list[dict[str, Any]] = field(default_factory=list)
    notices: tuple[str, ...] = ()


class EchoBackend:
    """``echo`` answers with the nesting depth of its arguments (computed without recursion)."""

    def tool(self, server: str, tool: str) -> ToolInfo:
        return ToolInfo(name=tool)

    async def call(self, server: str, tool: str, arguments: dict[str, Any]) -> Outcome:
        depth = 0
        pending: list[tuple[Any, int]] = [(arguments, 1)]
        while pending:
            value, d = pending.pop()
            depth = max(depth, d)
            children = value.values() if isinstance(value, dict) else value if isinstance(value, list) else []
            pending.extend((child, d + 1) for child in children if isinstance(child, dict | list))
        return Outcome(structured={"depth": depth + 1})  # + the request object around the arguments


@pytest.fixture
async def echo_server(tmp_path: Path) -> AsyncIterator[ToolServer]:
    server = ToolServer(EchoBackend(), ApprovalGate("never"))
    await server.start_unix(tmp_path / "tools.sock")
    yield server
    await server.aclose()


def nested_request(depth: int) -> bytes:
    """A /call body nested exactly ``depth`` levels deep (the request object is level 1)."""
    inner = depth - 2  # the request object and the arguments object
    return (
        b'{"server": "demo", "tool": "echo", "arguments": {"x": '
        + b"[" * inner
        + b'"]}[{\\""'  # brackets inside a string do not nest
        + b"]" * inner
        + b"}}"
    )


async def test_json_nested_up_to_400_levels_is_accepted_deeper_is_refused(echo_server: ToolServer) -> None:
    path, token = echo_server.address.removeprefix("unix:"), echo_server.token

    def send(body: bytes) -> tuple[int, dict[str, Any]]:
        return exchange(path, post_head(token, len(body)), [body])

    status, answer = await asyncio.to_thread(send, nested_request(400))
    assert (status, answer["ok"], answer["result"]) == (
        200,
        True,
        {"structured": {"depth": 400}, "content": []},
    )
    for depth in (401, 100_000):
        status, answer = await asyncio.to_thread(send, nested_request(depth))
        assert status == 400
        assert answer["error"] == {
            "type": "bad_request",
            "message": "request body is nested deeper than 400 levels of arrays/objects",
        }
    # many brackets that do not nest (strings, siblings) are not depth
    body = json.dumps(
        {"server": "demo", "tool": "echo", "arguments": {"s": "[{" * 50_000, "l": [[]] * 50_000}}
    )
    status, answer = await asyncio.to_thread(send, body.encode())
    assert (status, answer["result"]["structured"]) == (200, {"depth": 4})
    # an unterminated string of a million escaped quotes behind many brackets: a string pattern
    # that can fail would be retried at every quote (quadratic); this one answers at once
    trap = body.encode()[:-3] + b', "t": "' + b'\\"' * 1_000_000
    status, answer = await asyncio.to_thread(send, trap)
    assert (status, answer["error"]["message"]) == (400, "request body is not JSON")


async def test_kernel_gets_value_error_for_too_deep_arguments(echo_server: ToolServer) -> None:
    os.environ["IPYBOX_TOOL_SERVER"], os.environ["IPYBOX_TOOL_TOKEN"] = echo_server.address, echo_server.token

    def nest(depth: int) -> Any:
        value: Any = []
        for _ in range(depth - 1):
            value = [value]
        return value

    def calls() -> None:
        assert runtime.call_tool("demo", "echo", {"x": nest(398)}).structured == {"depth": 400}
        with pytest.raises(ValueError, match="nested deeper than 400 levels"):
            runtime.call_tool("demo", "echo", {"x": nest(399)})

    try:
        await asyncio.to_thread(calls)
    finally:
        runtime._drop_connection()


# --- connections ----------------------------------------------------------------------------------


def flood(path: str, count: int) -> list[socket.socket]:
    """``count`` connections that send nothing and stay open."""
    socks = []
    for _ in range(count):
        sock = socket.socket(socket.AF_UNIX)
        sock.connect(path)  # blocking: waits while the listen backlog is full
        socks.append(sock)
    return socks


def refused(socks: list[socket.socket], expected: int) -> int:
    """Wait until ``expected`` of ``socks`` were answered and closed by the server; how many were."""
    answered: set[socket.socket] = set()
    for _ in range(300):
        readable, _, _ = select.select([s for s in socks if s not in answered], [], [], 0.1)
        for sock in readable:
            assert b" 503 " in sock.recv(65536).split(b"\r\n")[0]
            answered.add(sock)
        if len(answered) >= expected:
            break
    return len(answered)


def test_connection_flood_is_bounded_and_other_servers_keep_working(start_app: Callable[..., App]) -> None:
    limit, count = 16, 400  # more connections than the application may open files (256)
    app = start_app(max_connections=limit)
    assert app.call("b", {}).structured == {"size": 2}
    assert app.call("a", {}).structured == {"size": 2}
    baseline = app.open_fds()

    socks = flood(app.path("a"), count)
    try:
        assert refused(socks, count - limit) == count - limit
        # the refused ones are answered before their descriptors are closed: wait for those
        for _ in range(300):
            held = app.open_fds() - baseline
            if held <= limit + 4:
                break
            select.select([], [], [], 0.1)
        assert limit - 4 <= held <= limit + 4, f"{held} descriptors held for {count} connections"
        # another tool server in the same application is unaffected
        assert app.call("b", {"x": 1}).structured == {"size": 8}
        # the flooded one says why it refuses
        with pytest.raises(runtime.ToolServerUnavailable, match=r"at most 16 at once .*max_connections"):
            app.call("a", {})
    finally:
        for sock in socks:
            sock.close()
    for _ in range(300):
        if app.open_fds() <= baseline:
            break
        select.select([], [], [], 0.05)
    assert app.call("a", {"y": 2}).structured == {"size": 8}


async def test_idle_and_trickling_connections_are_closed(tmp_path: Path) -> None:
    server = ToolServer(EchoBackend(), ApprovalGate("never"), idle_timeout=0.3)
    await server.start_unix(tmp_path / "tools.sock")
    path = server.address.removeprefix("unix:")

    def closed_by_server(first: bytes, trickle: bytes = b"") -> bytes:
        """What the server sends before closing a connection that sent ``first``, then ``trickle``."""
        sock = socket.socket(socket.AF_UNIX)
        sock.connect(path)
        sock.sendall(first)
        answer = b""
        for _ in range(600):  # at most 60 s; the idle timeout is 0.3 s
            if trickle:
                try:
                    sock.sendall(trickle)
                except (BrokenPipeError, ConnectionResetError):
                    break
            readable, _, _ = select.select([sock], [], [], 0.1)
            if readable:
                try:
                    data = sock.recv(65536)
                except ConnectionResetError:  # closed with our trickled bytes unread
                    break
                if not data:
                    break
                answer += data
        else:
            raise AssertionError("the server kept the connection open")
        sock.close()
        return answer

    try:
        assert await asyncio.to_thread(closed_by_server, b"") == b""  # never sends a byte
        # sends a request head one byte at a time, never finishing it
        assert await asyncio.to_thread(closed_by_server, b"POST /call HTTP/1.1\r\n", b"X") == b""
        # announces a body and stops sending it
        head = post_head(server.token, 100).encode()
        answer = await asyncio.to_thread(closed_by_server, head + b'{"server":')
        assert b" 408 " in answer.split(b"\r\n")[0] and b"not received within 0.3 s" in answer
        # control: the kernel's keep-alive connection was closed while idle; the next call reconnects
        os.environ["IPYBOX_TOOL_SERVER"], os.environ["IPYBOX_TOOL_TOKEN"] = server.address, server.token

        def two_calls_with_a_pause() -> list[Any]:
            first = runtime.call_tool("demo", "echo", {}).structured
            select.select([], [], [], 0.6)
            return [first, runtime.call_tool("demo", "echo", {}).structured]

        assert await asyncio.to_thread(two_calls_with_a_pause) == [{"depth": 2}, {"depth": 2}]
    finally:
        runtime._drop_connection()
        await server.aclose()


async def test_call_waiting_for_approval_outlives_the_idle_timeout(tmp_path: Path) -> None:
    gate = ApprovalGate("always")
    requests: list[ApprovalRequest] = []
    gate.listen(requests.append)
    server = ToolServer(EchoBackend(), gate, heartbeat=0.05, idle_timeout=0.2)
    await server.start_unix(tmp_path / "tools.sock")
    os.environ["IPYBOX_TOOL_SERVER"], os.environ["IPYBOX_TOOL_TOKEN"] = server.address, server.token
    try:
        task = asyncio.ensure_future(asyncio.to_thread(runtime.call_tool, "demo", "echo", {"a": [1]}))
        while not requests:
            await asyncio.sleep(0.01)
        await asyncio.sleep(1.0)  # five idle timeouts while the human decides
        await requests[0].accept()
        assert (await task).structured == {"depth": 3}
    finally:
        runtime._drop_connection()
        await server.aclose()
