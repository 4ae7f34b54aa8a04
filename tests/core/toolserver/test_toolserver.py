"""The tool server speaks the runtime's protocol: token, approvals, errors, heartbeats, cancellation.

The backend here is an in-process stand-in for the MCP registry (the unit under test is the tool
server); end-to-end tests with real MCP servers and kernels live in tests/core/executor.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import os
import socket
import threading
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from ipybox_core import runtime
from ipybox_core.approval import ApprovalGate, ApprovalRequest, ApprovalRules, AuditLog
from ipybox_core.errors import McpConnectionError, McpTimeout, ToolError, UnknownToolError
from ipybox_core.mcp.types import ToolAnnotations, ToolInfo
from ipybox_core.toolserver import ToolServer


@dataclass
class Outcome:
    structured: Any = None
    content: list[dict[str, Any]] = field(default_factory=list)
    notices: tuple[str, ...] = ()


class Backend:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str, dict[str, Any]]] = []
        self.release = asyncio.Event()
        self.cancelled = 0

    def tool(self, server: str, tool: str) -> ToolInfo:
        if server != "demo" or tool not in {"add", "fail", "slow", "dead", "timeout", "read", "restarted"}:
            raise UnknownToolError(f"unknown tool {server}.{tool}")
        return ToolInfo(name=tool, annotations=ToolAnnotations(read_only_hint=tool == "read"))

    async def call(self, server: str, tool: str, arguments: dict[str, Any]) -> Outcome:
        self.calls.append((server, tool, arguments))
        if tool == "fail":
            raise ToolError("the widget is broken", server=server, tool=tool)
        if tool == "dead":
            raise McpConnectionError("MCP server 'demo' died", server=server)
        if tool == "timeout":
            raise McpTimeout("MCP server 'demo' did not answer within 1 s", server=server)
        if tool == "slow":
            try:
                await self.release.wait()
            except asyncio.CancelledError:
                self.cancelled += 1
                raise
        if tool == "restarted":
            return Outcome(structured={}, notices=("MCP server 'demo' had stopped and was restarted",))
        total = sum(arguments.values()) if tool == "add" else 0
        return Outcome(structured={"result": total}, content=[{"type": "text", "text": str(total)}])


@dataclass
class Served:
    server: ToolServer
    backend: Backend
    gate: ApprovalGate
    requests: list[ApprovalRequest]

    def call(self, tool: str, args: dict[str, Any], token: str | None = None) -> runtime.ToolResponse:
        """Call through the kernel-side runtime, as generated code does (in a worker thread)."""
        os.environ["IPYBOX_TOOL_SERVER"] = self.server.address
        os.environ["IPYBOX_TOOL_TOKEN"] = self.server.token if token is None else token
        return runtime.call_tool("demo", tool, args)


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[Served]:
    backend = Backend()
    gate = ApprovalGate("never", audit=AuditLog(tmp_path / "audit.jsonl"))
    requests: list[ApprovalRequest] = []
    gate.listen(requests.append)
    server = ToolServer(backend, gate, heartbeat=0.05)
    await server.start_unix(tmp_path / "tools.sock")
    yield Served(server, backend, gate, requests)
    await server.aclose()
    runtime._drop_connection()
    os.environ.pop("IPYBOX_TOOL_SERVER", None)
    os.environ.pop("IPYBOX_TOOL_TOKEN", None)


async def in_thread(fn: Callable[[], Any]) -> Any:
    return await asyncio.to_thread(fn)


async def test_approved_call_returns_structured_and_content(served: Served) -> None:
    response = await in_thread(lambda: served.call("add", {"a": 1, "b": 2}))
    assert response.structured == {"result": 3}
    assert response.text == "3"
    assert served.backend.calls == [("demo", "add", {"a": 1, "b": 2})]


async def test_keep_alive_connection_is_reused_across_calls(served: Served) -> None:
    def many() -> list[Any]:
        return [served.call("add", {"a": i}).structured for i in range(20)]

    assert await in_thread(many) == [{"result": i} for i in range(20)]


async def test_request_without_valid_token_is_refused_and_reaches_nothing(served: Served) -> None:
    with pytest.raises(PermissionError, match="invalid token"):
        await in_thread(lambda: served.call("add", {"a": 1}, token="guess"))
    path = served.server.address.removeprefix("unix:")

    def raw_without_header() -> int:
        conn = http.client.HTTPConnection("x")
        conn.sock = socket.socket(socket.AF_UNIX)
        conn.sock.connect(path)
        conn.request("POST", "/call", body=json.dumps({"server": "demo", "tool": "add", "arguments": {}}))
        return conn.getresponse().status

    assert await in_thread(raw_without_header) == 401
    assert served.backend.calls == []


async def test_tool_error_protocol_error_and_timeout_map_to_kernel_exceptions(served: Served) -> None:
    with pytest.raises(runtime.ToolError, match="the widget is broken"):
        await in_thread(lambda: served.call("fail", {}))
    with pytest.raises(runtime.McpServerError, match="died"):
        await in_thread(lambda: served.call("dead", {}))
    with pytest.raises(runtime.ToolTimeoutError, match="did not answer"):
        await in_thread(lambda: served.call("timeout", {}))
    with pytest.raises(LookupError, match=r"unknown tool demo\.nope"):
        await in_thread(lambda: served.call("nope", {}))


async def test_rejection_raises_permission_error_with_reason_and_is_audited(served: Served) -> None:
    served.gate.policy = "always"
    task = asyncio.ensure_future(in_thread(lambda: served.call("add", {"a": 5})))
    while not served.requests:
        await asyncio.sleep(0.01)
    request = served.requests[0]
    assert (request.kind, request.name, request.args) == ("mcp", "demo.add", {"a": 5})
    await request.reject("not today")
    with pytest.raises(PermissionError, match="not today"):
        await task
    assert served.backend.calls == []
    [record] = served.gate.audit.read()  # type: ignore[union-attr]
    assert (record.approved, record.decided_by, record.reason) == (False, "user", "not today")


async def test_waiting_call_survives_heartbeats_and_edited_arguments_are_used(
    served: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The runtime gives up on a host silent for LOST_HOST_AFTER seconds. The human thinks four times
    # that long: only the heartbeats (every 0.05 s here) keep the call alive.
    monkeypatch.setattr(runtime, "LOST_HOST_AFTER", 0.75)
    served.gate.policy = "always"
    task = asyncio.ensure_future(in_thread(lambda: served.call("add", {"a": 5})))
    while not served.requests:
        await asyncio.sleep(0.01)
    await asyncio.sleep(4 * runtime.LOST_HOST_AFTER)
    assert not task.done()
    await served.requests[0].accept(arguments={"a": 40, "b": 2})
    assert (await task).structured == {"result": 42}


async def test_approval_timeout_rejects_and_says_so(served: Served) -> None:
    served.gate.policy = "always"
    served.gate.timeout = 0.2
    with pytest.raises(PermissionError, match=r"approval timed out after 0\.2 s"):
        await in_thread(lambda: served.call("add", {"a": 1}))
    with pytest.raises(Exception, match="already decided by timeout"):
        await served.requests[0].accept()


async def test_rules_auto_approve_read_only_and_allow_list_and_deny(served: Served) -> None:
    served.gate.policy = ApprovalRules(allow=["demo.add"], deny=["demo.fail"], allow_read_only=True)
    assert (await in_thread(lambda: served.call("add", {"a": 1}))).structured == {"result": 1}
    await in_thread(lambda: served.call("read", {}))
    with pytest.raises(PermissionError, match=r"policy:deny demo\.fail"):
        await in_thread(lambda: served.call("fail", {}))
    task = asyncio.ensure_future(in_thread(lambda: served.call("slow", {})))
    while not served.requests:
        await asyncio.sleep(0.01)
    assert served.requests[0].name == "demo.slow"  # not matched by any rule: asked
    await served.requests[0].reject("no")
    with pytest.raises(PermissionError):
        await task


async def test_concurrent_calls_wait_for_approval_at_once(served: Served) -> None:
    served.gate.policy = "always"
    tasks = [asyncio.ensure_future(in_thread(lambda i=i: served.call("add", {"a": i}))) for i in range(4)]
    while len(served.requests) < 4:
        await asyncio.sleep(0.01)
    for request in reversed(served.requests):
        await request.accept()
    assert sorted(r.structured["result"] for r in await asyncio.gather(*tasks)) == [0, 1, 2, 3]


async def test_dropped_connection_abandons_approval_and_cancels_the_call(served: Served) -> None:
    path = served.server.address.removeprefix("unix:")
    body = json.dumps({"server": "demo", "tool": "slow", "arguments": {}}).encode()

    def send_and_hang_up() -> None:
        sock = socket.socket(socket.AF_UNIX)
        sock.connect(path)
        head = (
            f"POST /call HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {served.server.token}\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        )
        sock.sendall(head.encode() + body)
        sock.settimeout(30)
        answer = b""
        while b"\r\n\r\n1\r\n\n" not in answer:  # the first heartbeat (a chunk of one "\n"): the
            data = sock.recv(4096)  # call is running (the headers come before the approval is decided)
            assert data, answer
            answer += data
        sock.close()

    await in_thread(send_and_hang_up)
    for _ in range(200):
        if served.backend.cancelled:
            break
        await asyncio.sleep(0.01)
    assert served.backend.cancelled == 1


async def test_pending_approval_is_abandoned_when_the_kernel_hangs_up(served: Served) -> None:
    served.gate.policy = "always"
    path = served.server.address.removeprefix("unix:")
    body = json.dumps({"server": "demo", "tool": "add", "arguments": {"a": 1}}).encode()
    sock = socket.socket(socket.AF_UNIX)
    await asyncio.to_thread(sock.connect, path)
    head = f"POST /call HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {served.server.token}\r\n"
    sock.sendall(f"{head}Content-Length: {len(body)}\r\n\r\n".encode() + body)
    while not served.requests:
        await asyncio.sleep(0.01)
    sock.close()
    for _ in range(200):
        if not served.requests[0].pending:
            break
        await asyncio.sleep(0.01)
    assert not served.requests[0].pending
    with pytest.raises(Exception, match="abandoned"):
        await served.requests[0].accept()
    assert served.backend.calls == []


async def test_shell_commands_go_through_the_same_gate(served: Served) -> None:
    served.gate.policy = ApprovalRules(allow=["shell:ls *"])
    os.environ["IPYBOX_TOOL_SERVER"] = served.server.address
    os.environ["IPYBOX_TOOL_TOKEN"] = served.server.token
    await in_thread(lambda: runtime.approve_shell_command("ls -la /tmp"))
    task = asyncio.ensure_future(in_thread(lambda: runtime.approve_shell_command("rm -rf /")))
    while not served.requests:
        await asyncio.sleep(0.01)
    assert (served.requests[0].kind, served.requests[0].args) == ("shell", {"command": "rm -rf /"})
    await served.requests[0].reject("dangerous")
    with pytest.raises(PermissionError, match="dangerous"):
        await task


async def test_lost_host_is_reported_instead_of_hanging(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A host that accepts the call but never answers (no heartbeat) is detected."""
    path = tmp_path / "mute.sock"
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(path))
    listener.listen(1)
    accepted: list[socket.socket] = []
    threading.Thread(target=lambda: accepted.append(listener.accept()[0]), daemon=True).start()
    monkeypatch.setattr(runtime, "LOST_HOST_AFTER", 0.3)
    monkeypatch.setenv("IPYBOX_TOOL_SERVER", f"unix:{path}")
    runtime._drop_connection()
    with pytest.raises(runtime.ToolServerUnavailable, match="stopped answering"):
        await in_thread(lambda: runtime.call_tool("demo", "add", {}))
    monkeypatch.setenv("IPYBOX_TOOL_SERVER", f"unix:{tmp_path / 'nothing.sock'}")
    with pytest.raises(runtime.ToolServerUnavailable, match="not reachable"):
        await in_thread(lambda: runtime.call_tool("demo", "add", {}))
    listener.close()
    for sock in accepted:
        sock.close()


async def test_tcp_listener_with_token(served: Served) -> None:
    tcp = ToolServer(served.backend, served.gate)
    await tcp.start_tcp("127.0.0.1", 0)
    try:
        assert tcp.address.startswith("http://127.0.0.1:")
        os.environ["IPYBOX_TOOL_SERVER"] = tcp.address
        os.environ["IPYBOX_TOOL_TOKEN"] = tcp.token
        response = await in_thread(lambda: runtime.call_tool("demo", "add", {"a": 2}))
        assert response.structured == {"result": 2}
        os.environ["IPYBOX_TOOL_TOKEN"] = served.server.token  # another server's token is refused
        with pytest.raises(PermissionError):
            await in_thread(lambda: runtime.call_tool("demo", "add", {"a": 2}))
    finally:
        await tcp.aclose()


async def test_a_notice_about_the_call_reaches_the_code_and_the_audit_log(
    served: Served, capsys: pytest.CaptureFixture[str]
) -> None:
    """A server that died between calls was restarted: the code's stderr and the audit log say so."""
    await asyncio.to_thread(served.call, "add", {"a": 1, "b": 2})
    assert capsys.readouterr().err == ""  # control: an ordinary call prints nothing
    await asyncio.to_thread(served.call, "restarted", {})
    assert capsys.readouterr().err == "ipybox: MCP server 'demo' had stopped and was restarted\n"
    assert served.gate.audit is not None
    notes = served.gate.audit.read_notices()
    assert [note["notice"] for note in notes] == ["MCP server 'demo' had stopped and was restarted"]
    assert notes[0]["tool"] == "restarted"  # control: the ordinary call before it left no notice
    assert [record.tool for record in served.gate.audit.read()] == ["add", "restarted"]


async def test_output_marks_are_left_out_only_while_the_policy_cannot_ask(
    served: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under a policy that decides everything itself the runtime stops publishing output marks (they
    only order requests the application sees); once the policy may ask, an unmarked request is sent
    back for a mark before it is decided, so every request the application sees carries one."""
    published: list[str] = []

    def publish() -> str:
        published.append(f"mark{len(published)}")
        return published[-1]

    monkeypatch.setattr(runtime, "_publish_mark", publish)
    monkeypatch.setattr(runtime, "_marks_wanted", True)
    for a in range(3):  # "never": the first answer says no mark is needed
        assert (await in_thread(lambda a=a: served.call("add", {"a": a}))).structured == {"result": a}
    assert published == ["mark0"]

    served.gate.policy = ApprovalRules(allow=["demo.add"], default="deny")  # cannot ask either
    await in_thread(lambda: served.call("add", {"a": 1}))
    assert published == ["mark0"]

    served.gate.policy = "always"
    task = asyncio.ensure_future(in_thread(lambda: served.call("add", {"a": 7})))
    while not served.requests:
        await asyncio.sleep(0.01)
    assert published == ["mark0", "mark1"]
    assert served.requests[0].output_mark == "mark1"  # refused unmarked, sent again with its mark
    await served.requests[0].accept()
    assert (await task).structured == {"result": 7}
    task = asyncio.ensure_future(in_thread(lambda: served.call("add", {"a": 8})))
    while len(served.requests) < 2:
        await asyncio.sleep(0.01)
    assert served.requests[1].output_mark == "mark2"  # marked from the start now
    await served.requests[1].accept()
    await task
    assert [c[2] for c in served.backend.calls] == [{"a": a} for a in (0, 1, 2, 1, 7, 8)]


async def test_a_hang_up_cancels_the_call_long_before_the_first_heartbeat(tmp_path: Path) -> None:
    """A call answered at once costs no watcher; one that runs is watched after a few ms, so an
    interrupted kernel's call is cancelled at once, not at the next heartbeat (5 s here)."""
    backend = Backend()
    server = ToolServer(backend, ApprovalGate("never"), heartbeat=5.0)
    await server.start_unix(tmp_path / "tools.sock")
    try:
        body = json.dumps({"server": "demo", "tool": "slow", "arguments": {}}).encode()
        head = f"POST /call HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {server.token}\r\n"
        sock = socket.socket(socket.AF_UNIX)
        await asyncio.to_thread(sock.connect, server.address.removeprefix("unix:"))
        sock.sendall(f"{head}Content-Length: {len(body)}\r\n\r\n".encode() + body)
        while not backend.calls:
            await asyncio.sleep(0.01)
        sock.close()
        started = asyncio.get_running_loop().time()
        while not backend.cancelled and asyncio.get_running_loop().time() - started < 4:
            await asyncio.sleep(0.01)
        assert backend.cancelled == 1
        assert asyncio.get_running_loop().time() - started < 1
    finally:
        await server.aclose()


@pytest.mark.parametrize(
    ("answer", "error"),
    [
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "unreadable answer"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 40\r\n\r\n{}", "closed the connection"),
        (b"SSH-2.0-OpenSSH\r\n", "not an HTTP answer"),
    ],
)
async def test_a_malformed_answer_is_reported_as_an_unavailable_host(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, answer: bytes, error: str
) -> None:
    path = tmp_path / "odd.sock"
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(path))
    listener.listen(1)

    def serve() -> None:
        sock = listener.accept()[0]
        sock.recv(65536)
        sock.sendall(answer)
        sock.close()

    threading.Thread(target=serve, daemon=True).start()
    monkeypatch.setenv("IPYBOX_TOOL_SERVER", f"unix:{path}")
    runtime._drop_connection()
    try:
        with pytest.raises(runtime.ToolServerUnavailable, match=error):
            await in_thread(lambda: runtime.call_tool("demo", "add", {}))
    finally:
        listener.close()
        runtime._drop_connection()
