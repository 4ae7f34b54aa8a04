"""``ipybox mcp`` over Streamable HTTP: the bearer token, and one kernel per client session (from a
``Sessions``: warm pool, idle timeout, ``--max-sessions``)."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import Client
from mcp_server_kit import (
    ECHO_SERVER,
    TEST_SERVER,
    ClientActor,
    Elicitations,
    HttpIpybox,
    session_dirs,
    session_path,
    start_http_ipybox,
    text_of,
    wait_gone,
)

from ipybox_core.cli import main
from ipybox_core.errors import ConfigError
from ipybox_core.mcp_server.auth import TOKEN_ENV, is_loopback, resolve_token

in_module_loop = pytest.mark.asyncio(loop_scope="module")

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "probe", "version": "0"},
    },
}
CALL_EXECUTE = {  # a 2026-07-28 request: no session, the tool call itself
    "jsonrpc": "2.0",
    "id": 2,
    "method": "tools/call",
    "params": {"name": "execute_code", "arguments": {"code": "open('leak.txt', 'w').write('x')"}},
}
CALL_ADD = "from mcptools.test import add\nprint('sum', add(a=20, b=22))"


@pytest.fixture(scope="module")
def http_ipybox(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpIpybox]:
    server = start_http_ipybox(tmp_path_factory.mktemp("ws"))
    yield server
    assert server.stop() == 0


def post(url: str, body: dict[str, object], headers: dict[str, str]) -> int:
    """POST ``body`` as JSON; returns the HTTP status."""
    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        method="POST",
        headers={
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            **headers,
        },
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        return error.code


async def kernel_pid(client: Client) -> int:
    """The pid of the kernel behind ``client``'s session."""
    return int(text_of(await client.call_tool("execute_code", {"code": "import os\nos.getpid()"})))


class Modern:
    """A 2026-07-28 client in raw JSON-RPC: its session is the ``Ipybox-Session`` header, and an
    approval comes back as an ``InputRequiredResult`` whose ``requestState`` anyone could send."""

    def __init__(self, server: HttpIpybox, session: str) -> None:
        self.server = server
        self.session = session

    def call(self, tool: str, arguments: dict[str, Any], **params: Any) -> dict[str, Any]:
        headers = {
            "Authorization": f"Bearer {self.server.token}",
            "MCP-Protocol-Version": "2026-07-28",
            "Mcp-Method": "tools/call",
            "Mcp-Name": tool,
            "Ipybox-Session": self.session,
            "Accept": "application/json, text/event-stream",
        }
        meta = {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}},
        }
        body = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": tool, "arguments": arguments, "_meta": meta, **params},
        }
        response = httpx.post(self.server.url, json=body, headers=headers, timeout=60)
        reply: dict[str, Any] = response.json()
        assert "result" in reply, reply
        result: dict[str, Any] = reply["result"]
        return result

    async def acall(self, tool: str, arguments: dict[str, Any], **params: Any) -> dict[str, Any]:
        return await asyncio.to_thread(self.call, tool, arguments, **params)

    async def answer(self, code: str, asked: dict[str, Any], action: str = "accept") -> dict[str, Any]:
        """Retry the ``execute_code`` of ``code`` that returned ``asked`` (an InputRequiredResult)."""
        (key,) = asked["inputRequests"]
        responses = {key: {"action": action, "content": {}}}
        return await self.acall(
            "execute_code", {"code": code}, requestState=asked["requestState"], inputResponses=responses
        )


def text(result: dict[str, Any]) -> str:
    return "\n".join(block["text"] for block in result.get("content", []) if block.get("type") == "text")


# --- the token --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Bearer wrong-token-wrong-token-wrong"},
        {"Authorization": "Basic dXNlcjpwYXNz"},
        {"Authorization": "Bearer "},
    ],
    ids=["none", "wrong", "basic", "empty"],
)
@in_module_loop
async def test_a_request_without_the_right_token_gets_401_and_reaches_nothing(
    http_ipybox: HttpIpybox, headers: dict[str, str]
) -> None:
    assert http_ipybox.token is not None and len(http_ipybox.token) >= 32
    assert await asyncio.to_thread(post, http_ipybox.url, INITIALIZE, headers) == 401
    modern = {**headers, "MCP-Protocol-Version": "2026-07-28", "Ipybox-Session": "intruder"}
    assert await asyncio.to_thread(post, http_ipybox.url, CALL_EXECUTE, modern) == 401
    assert session_dirs(http_ipybox.workspace) == set()  # no kernel was started for it
    assert not list(http_ipybox.workspace.rglob("leak.txt"))


@in_module_loop
async def test_the_printed_token_is_one_line_that_says_how_to_send_it(http_ipybox: HttpIpybox) -> None:
    assert http_ipybox.token is not None
    lines = [line for line in http_ipybox.log.read_text().splitlines() if "token" in line]
    assert lines == [
        f"ipybox MCP server token: {http_ipybox.token} (clients send the header "
        f'"Authorization: Bearer {http_ipybox.token}")'
    ]
    assert await asyncio.to_thread(post, http_ipybox.url, INITIALIZE, {}) == 401
    authorized = {"Authorization": f"Bearer {http_ipybox.token}"}
    assert await asyncio.to_thread(post, http_ipybox.url, INITIALIZE, authorized) == 200


@in_module_loop
async def test_a_client_without_the_token_cannot_connect(http_ipybox: HttpIpybox) -> None:
    with pytest.raises(BaseException) as caught:
        async with ClientActor(http_ipybox.client(token=None)) as client:
            await client.call_tool("execute_code", {"code": "1"})
    assert "401" in repr(caught.value) or "Unauthorized" in repr(caught.value)


def test_the_policy_requires_a_token_off_loopback() -> None:
    for host in ("127.0.0.1", "127.9.0.1", "::1", "[::1]", "localhost"):
        assert is_loopback(host), host
    for host in ("0.0.0.0", "::", "192.0.2.2", "10.0.0.1", "example.com", "fd00::2"):
        assert not is_loopback(host), host
    with pytest.raises(ConfigError, match="--no-auth is allowed only on a loopback"):
        resolve_token("0.0.0.0", no_auth=True, environ={})
    assert resolve_token("127.0.0.1", no_auth=True, environ={}) == (None, False)
    first, generated = resolve_token("0.0.0.0", environ={})
    second, _ = resolve_token("127.0.0.1", environ={})
    assert generated and first and second and first != second and len(first) >= 32
    fixed = "f" * 40
    assert resolve_token("0.0.0.0", environ={TOKEN_ENV: fixed}) == (fixed, False)
    with pytest.raises(ConfigError, match=TOKEN_ENV):
        resolve_token("0.0.0.0", environ={TOKEN_ENV: "short"})


def test_no_auth_off_loopback_stops_with_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        [
            "mcp",
            "--workspace",
            str(tmp_path),
            "--transport",
            "streamable-http",
            "--host",
            "0.0.0.0",
            "--no-auth",
        ]
    )
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert len(err.splitlines()) == 1 and "--no-auth is allowed only on a loopback" in err


@in_module_loop
async def test_off_loopback_a_fixed_token_is_required(tmp_path: Path) -> None:
    """Listening on every interface (not loopback) needs the token; the test talks over loopback only."""
    token = "fixed-token-for-this-deployment-0123456789"
    server = start_http_ipybox(tmp_path / "ws", "--host", "0.0.0.0", "--yes", env={TOKEN_ENV: token})
    try:
        log = server.log.read_text()
        assert "listening on http://0.0.0.0:" in log
        assert token not in log and f"token: from {TOKEN_ENV}" in log
        server = dataclasses.replace(server, url=server.url.replace("0.0.0.0", "127.0.0.1", 1))
        assert await asyncio.to_thread(post, server.url, INITIALIZE, {}) == 401
        wrong = {"Authorization": f"Bearer {token[:-1]}X"}
        assert await asyncio.to_thread(post, server.url, INITIALIZE, wrong) == 401
        async with ClientActor(server.client(token=token)) as client:
            result = await client.call_tool("execute_code", {"code": "6 * 7"})
        assert text_of(result) == "42"
    finally:
        assert server.stop() == 0


# --- one kernel per session ---------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["legacy", "auto"])
@in_module_loop
async def test_two_clients_have_separate_kernels_and_files(http_ipybox: HttpIpybox, mode: str) -> None:
    first = http_ipybox.client(mode=mode, session="first" if mode == "auto" else None)
    second = http_ipybox.client(mode=mode, session="second" if mode == "auto" else None)
    async with ClientActor(first) as a, ClientActor(second) as b:
        await a.call_tool(
            "execute_code", {"code": "secret = 'A'\nopen('mine.txt', 'w').write('A')\nimport os\nos.getcwd()"}
        )
        result = await b.call_tool("execute_code", {"code": "secret"})
        assert "NameError" in text_of(result)
        result = await b.call_tool("execute_code", {"code": "import os\nos.path.exists('mine.txt')"})
        assert text_of(result) == "False"
        result = await a.call_tool("execute_code", {"code": "secret, open('mine.txt').read()"})
        assert text_of(result) == "('A', 'A')"
        await a.call_tool("register_mcp_server", {"name": "test", "config": TEST_SERVER})
        listed = await b.call_tool("list_mcp_servers", {})
        assert text_of(listed) == "No MCP servers are registered."


@in_module_loop
async def test_a_pending_approval_does_not_block_another_client(http_ipybox: HttpIpybox) -> None:
    held = Elicitations(hold=asyncio.Event())
    async with (
        ClientActor(http_ipybox.client(elicitations=held)) as a,
        ClientActor(http_ipybox.client()) as b,
    ):
        await a.call_tool("register_mcp_server", {"name": "test", "config": TEST_SERVER})
        waiting = asyncio.create_task(a.call_tool("execute_code", {"code": CALL_ADD}))
        await asyncio.wait_for(held.asked.wait(), 60)
        result = await b.call_tool("execute_code", {"code": "print('b runs'); 1 + 1"})
        assert text_of(result) == "b runs\n2"
        assert not waiting.done()
        assert held.hold is not None
        held.hold.set()
        assert "sum 42" in text_of(await waiting)


@in_module_loop
async def test_ending_the_session_stops_its_kernel_and_removes_its_directory(http_ipybox: HttpIpybox) -> None:
    dirs_before = session_dirs(http_ipybox.workspace)
    async with ClientActor(http_ipybox.client()) as client:
        await client.call_tool("execute_code", {"code": "open('f.txt', 'w').write('x')"})
        kernel = await kernel_pid(client)
        (mine,) = session_dirs(http_ipybox.workspace) - dirs_before
        assert (session_path(http_ipybox.workspace, mine) / "f.txt").is_file()
    assert await wait_gone({kernel}) == set()  # the client's DELETE ended the session
    for _ in range(300):
        if mine not in session_dirs(http_ipybox.workspace):
            break
        await asyncio.sleep(0.1)
    assert mine not in session_dirs(http_ipybox.workspace)


@in_module_loop
async def test_a_client_cannot_resume_another_sessions_parked_execution(http_ipybox: HttpIpybox) -> None:
    alice, mallory = Modern(http_ipybox, "alice"), Modern(http_ipybox, "mallory")
    alices = text(await alice.acall("execute_code", {"code": "import os\nos.getcwd()"})).strip("'")
    registered = await alice.acall("register_mcp_server", {"name": "test", "config": TEST_SERVER})
    assert not registered.get("isError"), registered
    code = CALL_ADD + "\nopen('continued.txt', 'w').write('yes')"
    asked = await alice.acall("execute_code", {"code": code})
    assert asked.get("resultType") == "input_required", asked
    stolen = await mallory.answer(code, asked)
    assert stolen.get("isError") and "is gone" in text(stolen), stolen
    await asyncio.sleep(0.5)
    assert not list(http_ipybox.workspace.rglob("continued.txt"))  # the code did not go on
    resumed = await alice.answer(code, asked)  # its own session still can
    assert "sum 42" in text(resumed), resumed
    (written,) = http_ipybox.workspace.rglob("continued.txt")
    assert str(written.parent) == alices and "alice" not in alices  # a name that reveals no key


@in_module_loop
async def test_max_sessions_refuses_a_new_session_until_one_is_closed(tmp_path: Path) -> None:
    server = start_http_ipybox(tmp_path / "ws", "--max-sessions", "1")
    try:
        held = Elicitations(hold=asyncio.Event())
        first = ClientActor(server.client(elicitations=held))
        a = await first.__aenter__()
        await a.call_tool("register_mcp_server", {"name": "test", "config": TEST_SERVER})
        waiting = asyncio.create_task(a.call_tool("execute_code", {"code": CALL_ADD}))
        await asyncio.wait_for(held.asked.wait(), 60)  # a's kernel waits for approval: busy
        async with ClientActor(server.client()) as b:
            refused = await b.call_tool("execute_code", {"code": "1 + 1"})
            assert refused.is_error
            assert "--max-sessions 1" in text_of(refused) and "waiting for approval" in text_of(refused)
            waiting.cancel()
            await asyncio.gather(waiting, return_exceptions=True)
            await first.__aexit__(None, None, None)  # a ends its session: its slot is free
            result = await b.call_tool("execute_code", {"code": "1 + 1"})
            assert text_of(result) == "2"
    finally:
        assert server.stop() == 0


@in_module_loop
async def test_an_idle_session_gets_a_new_kernel_and_is_told(tmp_path: Path) -> None:
    server = start_http_ipybox(tmp_path / "ws", "--idle-timeout", "1")
    try:
        async with ClientActor(server.client()) as client:
            await client.call_tool("execute_code", {"code": "x = 1\nopen('kept.txt', 'w').write('k')"})
            kernel = await kernel_pid(client)
            assert await wait_gone({kernel}) == set()  # closed while idle
            result = await client.call_tool("execute_code", {"code": "open('kept.txt').read()\nx"})
            text = text_of(result)
            assert text.startswith(
                "Note: the Python kernel of this conversation was restarted (after 1 s idle)"
            )
            assert "register_mcp_server are gone too" in text
            assert "NameError" in text
            result = await client.call_tool("execute_code", {"code": "open('kept.txt').read()"})
            assert text_of(result) == "'k'"  # told once; files kept
    finally:
        assert server.stop() == 0
    assert session_dirs(tmp_path / "ws") == set()  # removed when the server stopped


@in_module_loop
async def test_a_parked_execution_keeps_its_session_past_the_idle_timeout(tmp_path: Path) -> None:
    server = start_http_ipybox(tmp_path / "ws", "--idle-timeout", "2")  # > a call's gap on a loaded CI
    try:
        alice = Modern(server, "alice")
        await alice.acall("register_mcp_server", {"name": "test", "config": TEST_SERVER})
        await alice.acall("execute_code", {"code": "kept = 'still here'"})
        asked = await alice.acall("execute_code", {"code": CALL_ADD})
        assert asked.get("resultType") == "input_required", asked
        started = time.monotonic()
        while time.monotonic() - started < 5:  # two and a half idle timeouts, waiting for approval
            await asyncio.sleep(0.2)
        resumed = await alice.answer(CALL_ADD, asked)
        assert "sum 42" in text(resumed) and "restarted" not in text(resumed), resumed
        after = await alice.acall("execute_code", {"code": "kept"})
        assert text(after) == "'still here'", after
    finally:
        assert server.stop() == 0


@in_module_loop
async def test_config_servers_are_shared_by_every_session_and_a_broken_one_is_listed(tmp_path: Path) -> None:
    config = {"mcpServers": {"test": TEST_SERVER, "broken": {"command": str(tmp_path / "no-such-server")}}}
    (tmp_path / "mcp.json").write_text(json.dumps(config))
    server = start_http_ipybox(tmp_path / "ws", "--yes", "--config", str(tmp_path / "mcp.json"))
    try:
        async with ClientActor(server.client()) as a, ClientActor(server.client()) as b:
            count = "from mcptools.test import count\ncount()"
            first = text_of(await a.call_tool("execute_code", {"code": count}))
            second = text_of(await b.call_tool("execute_code", {"code": count}))
            assert (first, second) == ("1", "2")  # one server process for both sessions
            for client in (a, b):
                listing = text_of(await client.call_tool("list_mcp_servers", {}))
                assert "test: `mcptools.test`" in listing
                assert "broken: FAILED to start" in listing and "no-such-server" in listing
            again = await a.call_tool("register_mcp_server", {"name": "test", "config": ECHO_SERVER})
            assert again.is_error and "shared by every session" in text_of(again)
            own = await a.call_tool("register_mcp_server", {"name": "mine", "config": ECHO_SERVER})
            assert not own.is_error, text_of(own)
            echoed = await a.call_tool(
                "execute_code", {"code": "from mcptools.mine import echo\necho(text='hi')"}
            )
            assert "hi" in text_of(echoed)
            assert "mine" not in text_of(await b.call_tool("list_mcp_servers", {}))
            other = await b.call_tool(
                "execute_code", {"code": "from mcptools.mine import echo\necho(text='hi')"}
            )
            assert "no MCP server 'mine' is registered" in text_of(other)  # b has no connection to it
    finally:
        assert server.stop() == 0
    assert server.log.read_text().count("MCP server 'broken' from the config file failed to start") == 1
