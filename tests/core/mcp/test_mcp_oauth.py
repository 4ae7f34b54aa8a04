"""OAuth 2.1 against a real protected Streamable HTTP MCP server (issue 27, item 1).

``tests/servers/oauth_server.py`` runs an authorization server and a resource server on loopback
(the MCP SDK's server-side auth). The tests authorize through the application-facing event (an
``authorize`` callback that follows the authorization URL like a browser and answers with the
redirect), run kernel code that calls the server's tools, and check that the access token is in
neither the kernel nor its environment (nor any file it can read), with a planted copy as the
control. Without the right config, a 401 is one line naming the server and the fix.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest

from example_runner import EXAMPLES, documented
from ipybox_core.errors import ConfigError, McpAuthorizationError
from ipybox_core.executor import CodeExecutor
from ipybox_core.mcp import McpRegistry, parse_server_config
from ipybox_core.mcp.oauth import AuthorizationRequest
from ipybox_core.mcp.oauth_store import FileTokenStore, MemoryTokenStore
from prerequisites import require
from servers import PYTHON, SERVERS_DIR
from servers.announce import start_announcing
from servers.oauth_server import ACCESS_TOKEN_PREFIX

OAUTH_SCRIPT = SERVERS_DIR / "oauth_server.py"


def start_oauth_server(log: Path) -> tuple[subprocess.Popen[str], int, int]:
    """Start ``oauth_server.py``; its process and the resource server's and the open server's ports."""
    process, (_, protected, unprotected) = start_announcing([PYTHON, str(OAUTH_SCRIPT)], "PORTS", log)
    return process, int(protected), int(unprotected)


@pytest.fixture(scope="module")
def mcp_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    process, port, _ = start_oauth_server(tmp_path_factory.mktemp("oauth") / "server.log")
    yield f"http://127.0.0.1:{port}/mcp"
    process.terminate()
    process.wait(timeout=10)


class Browser:
    """The application's answer to the authorization event: follow the URL, return the redirect."""

    def __init__(self) -> None:
        self.requests: list[AuthorizationRequest] = []
        self.declines = False

    async def __call__(self, request: AuthorizationRequest) -> str:
        self.requests.append(request)
        if self.declines:
            return f"{request.redirect_uri}?error=access_denied"
        async with httpx2.AsyncClient() as http:
            response = await http.get(request.url)
        assert response.is_redirect, response.text
        return response.headers["location"]


async def test_kernel_code_calls_the_tools_of_an_authorized_server_and_never_sees_the_token(
    mcp_url: str, tmp_path: Path
) -> None:
    browser, store = Browser(), FileTokenStore(tmp_path / "state" / "oauth")
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    async with CodeExecutor(workspace=workspace, mcp_authorize=browser, mcp_token_store=store) as executor:
        await executor.register_mcp_server("demo", {"url": mcp_url, "auth": "oauth"})
        (request,) = browser.requests
        assert request.server == "demo" and "code_challenge=" in request.url and "resource=" in request.url
        result = await executor.execute(
            "from mcptools.demo import add, whoami\nprint(add(a=2, b=3), whoami())", approve_all=True
        )
        assert result.ok, result.error
        total, client_id = result.text.split()
        assert total == "5" and client_id  # a dynamically registered client

        (token_file,) = store.directory.iterdir()
        assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
        assert stat.S_IMODE(store.directory.stat().st_mode) == 0o700
        access_token = token_file.read_text().split('"access_token": "')[1].split('"')[0]
        assert access_token.startswith(ACCESS_TOKEN_PREFIX)

        scan = KERNEL_SCAN.replace("TOKEN_HEX", access_token.encode().hex())
        found = await executor.execute(scan)
        assert found.ok and found.text.strip() == "not found", found.text
        # the control: the same scan finds copies planted where the kernel can see them
        (workspace / "planted.txt").write_text(f"copied by mistake: {access_token}")
        await executor.execute(
            f"leaked = {{'token': bytes.fromhex('{access_token.encode().hex()}').decode()}}"
        )
        planted = await executor.execute(scan)
        assert "planted.txt" in planted.text and "memory" in planted.text, planted.text


KERNEL_SCAN = """
import gc, os, sys
token = bytes.fromhex("TOKEN_HEX").decode()  # not a literal: the code itself holds no copy
places = []
if any(token in value for value in os.environ.values()):
    places.append("environment")
with open("/proc/self/environ", "rb") as environ:
    if token.encode() in environ.read():
        places.append("/proc/self/environ")
for root in {os.getcwd(), *(p for p in sys.path if p and os.path.isdir(p) and "site-packages" not in p)}:
    for folder, _, files in os.walk(root):
        for name in files:
            try:
                with open(os.path.join(folder, name), "rb") as file:
                    if token.encode() in file.read():
                        places.append("file " + os.path.join(folder, name))
            except OSError:
                pass
del token
def _leaks():  # every string reachable from the objects the collector tracks (untracked dicts too)
    seen, todo = set(), list(gc.get_objects())
    while todo:
        item = todo.pop()
        if id(item) in seen:
            continue
        seen.add(id(item))
        if isinstance(item, str):
            if len(item) > len("PREFIX") and item.startswith("PREFIX"):
                return True
        elif isinstance(item, (dict, list, tuple, set, frozenset)):
            todo.extend(gc.get_referents(item))
    return False
if _leaks():
    places.append("memory")
print(", ".join(places) or "not found")
""".replace("PREFIX", ACCESS_TOKEN_PREFIX)
"""Kernel code that looks for the token: its environment, files under the workspace and sys.path, and
the strings held by its objects."""


async def test_an_sse_server_is_authorized_the_same_way(mcp_url: str) -> None:
    browser = Browser()
    sse_url = mcp_url.removesuffix("/mcp") + "/sse"
    async with McpRegistry(authorize=browser, token_store=MemoryTokenStore()) as registry:
        with pytest.raises(McpAuthorizationError, match="requires authorization"):
            await registry.add("plain", {"url": sse_url})
        await registry.add("demo", {"url": sse_url, "auth": "oauth"})
        assert (await registry.call("demo", "add", {"a": 3, "b": 4})).text == "7"
    assert len(browser.requests) == 1


async def test_the_time_a_user_takes_to_authorize_does_not_count_against_the_connect_timeout(
    mcp_url: str,
) -> None:
    browser = Browser()

    async def slow_user(request: AuthorizationRequest) -> str:
        await asyncio.sleep(2.0)  # the subject: longer than the connect timeout below
        return await browser(request)

    async with McpRegistry(
        connect_timeout=1.0, authorize=slow_user, token_store=MemoryTokenStore()
    ) as registry:
        await registry.add("demo", {"url": mcp_url, "auth": "oauth"})
        assert (await registry.call("demo", "add", {"a": 1, "b": 2})).text == "3"


async def test_tokens_are_reused_by_the_next_run_without_asking_again(mcp_url: str) -> None:
    browser, store = Browser(), MemoryTokenStore()
    async with McpRegistry(authorize=browser, token_store=store) as registry:
        await registry.add("demo", {"url": mcp_url, "auth": "oauth"})
    async with McpRegistry(token_store=store) as registry:  # no authorize callback: nobody to ask
        await registry.add("demo", {"url": mcp_url, "auth": "oauth"})
        assert (await registry.call("demo", "add", {"a": 1, "b": 1})).text == "2"
    assert len(browser.requests) == 1


async def test_a_token_revoked_mid_session_is_authorized_again_through_the_same_event(mcp_url: str) -> None:
    browser = Browser()
    async with McpRegistry(authorize=browser, token_store=MemoryTokenStore()) as registry:
        await registry.add("demo", {"url": mcp_url, "auth": "oauth"})
        assert int((await registry.call("demo", "revoke_access_tokens")).text) >= 1
        assert (await registry.call("demo", "add", {"a": 2, "b": 2})).text == "4"  # 401, authorized again
        assert len(browser.requests) == 2
        await registry.call("demo", "revoke_access_tokens")
        browser.declines = True  # this time the user says no: the call fails with the one line
        with pytest.raises(McpAuthorizationError) as raised:
            await registry.call("demo", "add", {"a": 1, "b": 1})
    assert str(raised.value) == (
        "MCP server 'demo': OAuth authorization failed: the authorization server refused it: "
        "access_denied; authorize again (the next call asks again)"
    )


async def test_a_stored_token_that_expired_is_refreshed_without_asking(mcp_url: str) -> None:
    store, browser = MemoryTokenStore(), Browser()
    async with McpRegistry(authorize=browser, token_store=store) as registry:
        await registry.add("demo", {"url": mcp_url, "auth": "oauth"})
        await registry.call("demo", "revoke_access_tokens")  # the stored access token is dead now
        browser.declines = True  # closing the session meets the 401: no new token from that
    (record,) = store.records.values()
    record["expires_at"] = time.time() - 60  # and the store knows it expired
    async with McpRegistry(token_store=store) as registry:  # nobody to ask: only a refresh can work
        await registry.add("demo", {"url": mcp_url, "auth": "oauth"})
        assert (await registry.call("demo", "add", {"a": 5, "b": 5})).text == "10"


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        ({}, "MCP server 'demo' requires authorization (HTTP 401"),
        (
            {"headers": {"Authorization": "Bearer expired"}},
            "MCP server 'demo' rejected the Authorization header of its config (HTTP 401",
        ),
    ],
    ids=["no-auth-config", "wrong-static-token"],
)
async def test_a_401_is_one_line_naming_the_server_and_the_fix(
    mcp_url: str, config: dict[str, Any], expected: str
) -> None:
    async with McpRegistry() as registry:
        with pytest.raises(McpAuthorizationError) as raised:
            await registry.add("demo", {"url": mcp_url, **config})
    message = str(raised.value)
    assert message.startswith(expected) and '"auth": "oauth"' in message and "\n" not in message, message


async def test_authorization_without_an_authorize_callback_says_how_to_answer_it(mcp_url: str) -> None:
    async with McpRegistry(token_store=MemoryTokenStore()) as registry:
        with pytest.raises(McpAuthorizationError) as raised:
            await registry.add("demo", {"url": mcp_url, "auth": "oauth"})
    message = str(raised.value)
    assert message.startswith("MCP server 'demo': OAuth authorization failed: a user must authorize")
    assert "authorize=" in message and "\n" not in message


async def test_a_declined_authorization_is_one_line(mcp_url: str) -> None:
    async def decline(request: AuthorizationRequest) -> str:
        return f"{request.redirect_uri}?error=access_denied&error_description=the+user+said+no"

    async with McpRegistry(authorize=decline, token_store=MemoryTokenStore()) as registry:
        with pytest.raises(McpAuthorizationError) as raised:
            await registry.add("demo", {"url": mcp_url, "auth": "oauth"})
    assert str(raised.value) == (
        "MCP server 'demo': OAuth authorization failed: the authorization server refused it: "
        "access_denied (the user said no); authorize again (the next call asks again)"
    )


async def test_configured_scopes_are_asked_for_besides_the_servers(mcp_url: str) -> None:
    browser = Browser()
    browser.declines = True  # only the authorization URL matters here
    async with McpRegistry(authorize=browser, token_store=MemoryTokenStore()) as registry:
        with pytest.raises(McpAuthorizationError):
            await registry.add("demo", {"url": mcp_url, "auth": {"type": "oauth", "scopes": ["profile"]}})
    (request,) = browser.requests
    assert "&scope=tools+profile" in request.url, request.url


@pytest.mark.parametrize(
    ("auth", "problem"),
    [
        (
            {"type": "oauth", "grant": "client_credentials", "client_id": "svc"},
            "needs client_secret or private_key",
        ),
        ({"type": "oauth", "client_secret": "s"}, "client_secret needs client_id"),
        ({"type": "oauth", "scopes": "read"}, "auth.scopes: Input should be a valid list"),
        ({"type": "oauth", "client_metadata_url": "http://x/a.json"}, "auth.client_metadata_url"),
        ({"type": "basic"}, "auth.type: Input should be 'oauth'"),
    ],
)
def test_an_invalid_auth_config_is_one_readable_line(auth: dict[str, Any], problem: str) -> None:
    with pytest.raises(ConfigError) as raised:
        parse_server_config("demo", {"url": "https://mcp.example.com/mcp", "auth": auth})
    message = str(raised.value)
    assert message.startswith("MCP server 'demo': invalid Streamable HTTP config: ") and problem in message
    assert "\n" not in message and "Value error" not in message


def test_auth_on_a_stdio_server_says_where_its_credentials_go() -> None:
    with pytest.raises(ConfigError) as raised:
        parse_server_config("local", {"command": "server", "auth": "oauth"})
    assert str(raised.value) == (
        "MCP server 'local': 'auth' (OAuth) is for HTTP and SSE servers; a stdio server gets its "
        "credentials in its 'env'"
    )


def test_auth_secrets_are_filled_from_the_environment_and_never_shown() -> None:
    config = parse_server_config(
        "demo",
        {"url": "https://mcp.example.com/mcp", "auth": {"client_id": "app", "client_secret": "${SECRET}"}},
        environ={"SECRET": "s3cr3t"},
    )
    assert config.auth is not None and config.auth.client_secret == "s3cr3t"  # type: ignore[attr-defined]
    assert "s3cr3t" not in repr(config) and "s3cr3t" not in config.describe()


def test_the_file_store_refuses_a_directory_a_sandbox_can_write(tmp_path: Path) -> None:
    from ipybox_core._host_process import mark_sandbox_writable

    writable = tmp_path / "sandbox-workspace"
    writable.mkdir()
    mark_sandbox_writable([writable], python_env_read_only=True)
    store = FileTokenStore(writable / "state")
    with pytest.raises(ConfigError, match="which sandboxed code can write"):
        store._save("key", {"tokens": {}})
    assert not (writable / "state").exists()


async def test_the_default_token_directory_is_hidden_from_a_sandbox_that_shows_the_home(
    tmp_path: Path,
) -> None:
    from ipybox_core.sandbox import SandboxPolicy, SandboxUnavailable

    home = tmp_path / "home"
    tokens = home / ".local" / "state" / "ipybox" / "oauth"  # the default store under this home
    await FileTokenStore(tokens).save("server", {"tokens": {"access_token": ACCESS_TOKEN_PREFIX + "x"}})
    (home / "notes.txt").write_text("visible")  # the control: the home itself is shown
    policy = SandboxPolicy(home=home, allow_read=(home,), sandbox_uid=None)  # the owner of the 0600 file
    code = f"""
import os
for path in ({str(home / "notes.txt")!r}, *({str(tokens)!r} + "/" + n for n in {os.listdir(tokens)!r})):
    try:
        print(path.rsplit("/", 1)[1], open(path).read()[:7])
    except OSError as error:
        print(path.rsplit("/", 1)[1], type(error).__name__)
"""
    try:
        async with CodeExecutor(workspace=tmp_path / "ws", sandbox=policy) as executor:
            result = await executor.execute(code)
    except SandboxUnavailable as exc:
        require(False, f"bubblewrap cannot run here: {exc}")
        return
    first, second = result.text.splitlines()
    assert first == "notes.txt visible"
    assert second.endswith(("FileNotFoundError", "PermissionError", "IsADirectoryError")), second


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def test_ipybox_run_prints_the_authorization_url_and_receives_the_redirect(
    mcp_url: str, tmp_path: Path
) -> None:
    redirect = f"http://127.0.0.1:{_free_port()}/callback"
    config = tmp_path / "mcp.json"
    entry = {"url": mcp_url, "auth": {"type": "oauth", "redirect_uri": redirect}}
    config.write_text(json.dumps({"mcpServers": {"demo": entry}}))
    script = tmp_path / "script.py"
    script.write_text("from mcptools.demo import add\nprint('sum', add(a=20, b=22))\n")
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    command = [sys.executable, "-m", "ipybox_core.cli", "run", str(script), "--config", str(config), "--yes"]
    process = subprocess.Popen(
        [*command, "--workspace", str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**env, "IPYBOX_STATE_DIR": str(tmp_path / "state")},
    )
    try:
        assert process.stderr is not None
        prompt = ""
        while "needs your authorization: open " not in prompt:
            prompt = process.stderr.readline()
            assert prompt or process.poll() is None, "ipybox run ended without asking for authorization"
        url = prompt.split("open ", 1)[1].strip()
        assert "ipybox: MCP server 'demo' needs your authorization" in prompt
        # the user's browser: the authorization server approves and sends it to ipybox's loopback listener
        page = httpx2.get(url, follow_redirects=True, timeout=60)
        assert "Authorization received" in page.text
        stdout, stderr = process.communicate(timeout=120)
    finally:
        process.kill() if process.poll() is None else None
    assert process.returncode == 0, stderr
    assert "sum 42" in stdout
    assert len(list((tmp_path / "state" / "oauth").iterdir())) == 1


def test_the_oauth_example_authorizes_once_lists_the_functions_and_shows_the_401_line(
    mcp_url: str, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    lines = []
    for run in range(2):  # the second run finds the tokens the first one stored
        process = subprocess.Popen(
            [sys.executable, str(EXAMPLES / "oauth.py"), mcp_url, "--state", str(state)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=tmp_path,
            env={k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "BROWSER")},
        )
        assert process.stdout is not None
        try:
            first = process.stdout.readline()
            if run == 0:
                assert "needs your authorization: open " in first, first
                page = httpx2.get(first.split("open ", 1)[1].strip(), follow_redirects=True, timeout=60)
                assert "Authorization received" in page.text
                first = ""
            stdout, stderr = process.communicate(timeout=120)
        finally:
            process.kill() if process.poll() is None else None
        assert process.returncode == 0, stderr
        lines = (first + stdout).splitlines()
        assert "needs your authorization" not in stdout
    assert lines[0] == "functions: ['add', 'revoke_access_tokens', 'whoami']"
    assert lines[1].startswith("MCP server 'unauthorized' requires authorization (HTTP 401")
    documented(
        "api_generation.md",
        "functions: ['add', 'revoke_access_tokens', 'whoami']",
        lines[1].split(" (HTTP")[0],
    )
