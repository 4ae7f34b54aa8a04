"""OAuth per conversation in Sessions (issue 27): a server with ``"account": "conversation"`` is
authorized by each conversation's own user, with its own tokens, and a call carries only its own
conversation's token. A real authorization server that knows several users and a resource server
that records whose token each call carried (tests/servers/oauth_users_server.py) run on loopback;
each conversation's "browser" is signed in as that conversation's user.
"""

from __future__ import annotations

import json
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest

from core.mcp.test_mcp_oauth import KERNEL_SCAN
from ipybox_core import Sessions
from ipybox_core.errors import ConfigError, McpAuthorizationError
from ipybox_core.executor import ExecutionResult
from ipybox_core.mcp import parse_server_config
from ipybox_core.mcp.elicitation import ElicitationAnswer, ElicitationRequest
from ipybox_core.mcp.oauth import AuthorizationRequest
from ipybox_core.mcp.oauth_store import FileTokenStore, MemoryTokenStore
from ipybox_core.sessions import UnknownRedirect
from servers import PYTHON, SERVERS_DIR
from servers.announce import start_announcing

USERS = {"conversation-a": "alice", "conversation-b": "bob"}
"""Who each conversation's user signs in as at the authorization server."""


@pytest.fixture(scope="module")
def resource(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The resource server's base URL (``/mcp``, and ``/seen``: the user of each call's token)."""
    log = tmp_path_factory.mktemp("oauth-users") / "server.log"
    process, (_, port) = start_announcing([PYTHON, str(SERVERS_DIR / "oauth_users_server.py")], "PORTS", log)
    yield f"http://127.0.0.1:{port}"
    process.terminate()
    process.wait(timeout=10)


class Browsers:
    """The application's answer to each conversation's authorization: that conversation's user's
    browser (signed in at the authorization server) follows the URL; the answer is the redirect."""

    def __init__(self) -> None:
        self.requests: list[AuthorizationRequest] = []

    async def __call__(self, request: AuthorizationRequest) -> str:
        self.requests.append(request)
        assert request.conversation is not None, "a conversation's authorization names it"
        async with httpx2.AsyncClient(cookies={"user": USERS[request.conversation]}) as browser:
            response = await browser.get(request.url)
        assert response.is_redirect, response.text
        return response.headers["location"]


async def seen(resource: str) -> list[str]:
    async with httpx2.AsyncClient() as http:
        return list((await http.get(f"{resource}/seen")).json())


ME = "from mcptools.docs import me\nprint(me())"


async def test_each_conversation_authorizes_its_own_user_and_calls_with_its_own_token(
    resource: str, tmp_path: Path
) -> None:
    browsers, store = Browsers(), FileTokenStore(tmp_path / "state" / "oauth")
    config = {"url": f"{resource}/mcp", "auth": {"type": "oauth", "account": "conversation"}}
    earlier = len(await seen(resource))
    async with Sessions(
        root=tmp_path / "root",
        mcp_servers={"docs": config},
        approval="never",
        warm=0,
        mcp_authorize=browsers,
        mcp_token_store=store,
    ) as sessions:
        assert browsers.requests == []  # nobody authorized for the whole application
        a = await sessions.session("conversation-a")  # the first conversation lists the tools
        assert [r.conversation for r in browsers.requests] == ["conversation-a"]
        first = await a.executor.execute(ME)
        assert first.text.strip() == "alice", first.text

        b = await sessions.session("conversation-b")
        assert len(browsers.requests) == 1  # B authorizes at its first call, not before
        second = await b.executor.execute(ME)
        assert second.text.strip() == "bob", second.text  # B's own user, not A's token
        assert [r.conversation for r in browsers.requests] == ["conversation-a", "conversation-b"]
        assert all(r.server == "docs" for r in browsers.requests)

        again = await a.executor.execute(ME)
        assert again.text.strip() == "alice"  # A's token still, B's authorization changed nothing
        assert len(browsers.requests) == 2
        assert (await seen(resource))[earlier:] == ["alice", "bob", "alice"]  # what the resource server saw

        # One 0600 file per conversation, each holding that conversation's token only.
        files = sorted(store.directory.iterdir())
        assert len(files) == 2
        assert stat.S_IMODE(store.directory.stat().st_mode) == 0o700
        tokens = {}
        for file in files:
            assert stat.S_IMODE(file.stat().st_mode) == 0o600
            document = json.loads(file.read_text())
            conversation = json.loads(document["key"].split(" conversation=", 1)[1])
            tokens[conversation] = document["record"]["tokens"]["access_token"]
        assert set(tokens) == set(USERS) and tokens["conversation-a"] != tokens["conversation-b"]

        for session in (a, b):  # neither kernel holds either token, anywhere it can look
            for token in tokens.values():
                scan = await session.executor.execute(KERNEL_SCAN.replace("TOKEN_HEX", token.encode().hex()))
                assert scan.text.strip() == "not found", scan.text
        # the control: the same scan finds B's token once it is planted in A's kernel
        await a.executor.execute(
            f"planted = [bytes.fromhex('{tokens['conversation-b'].encode().hex()}').decode()]"
        )
        planted = await a.executor.execute(
            KERNEL_SCAN.replace("TOKEN_HEX", tokens["conversation-b"].encode().hex())
        )
        assert "memory" in planted.text, planted.text


async def test_a_conversation_s_stored_token_is_used_by_its_next_session_only(
    resource: str, tmp_path: Path
) -> None:
    """A conversation's tokens outlive its session (the store), and stay its own."""
    browsers, store = Browsers(), FileTokenStore(tmp_path / "state" / "oauth")
    config = {"url": f"{resource}/mcp", "auth": {"type": "oauth", "account": "conversation"}}
    options: dict[str, Any] = {
        "mcp_servers": {"docs": config},
        "approval": "never",
        "warm": 0,
        "mcp_token_store": store,
    }
    async with Sessions(root=tmp_path / "root", mcp_authorize=browsers, **options) as sessions:
        a = await sessions.session("conversation-a")
        assert (await a.executor.execute(ME)).text.strip() == "alice"
    async with Sessions(root=tmp_path / "root", mcp_authorize=browsers, **options) as sessions:
        a = await sessions.session("conversation-a")  # its stored token: nobody asked again
        assert len(browsers.requests) == 1
        b = await sessions.session("conversation-b")
        assert (await b.executor.execute(ME)).text.strip() == "bob"
        assert (await a.executor.execute(ME)).text.strip() == "alice"
    assert [r.conversation for r in browsers.requests] == ["conversation-a", "conversation-b"]


async def test_without_a_callback_a_conversation_s_authorization_is_a_question_of_its_execution(
    resource: str, tmp_path: Path
) -> None:
    """No mcp_authorize: B's authorization is an event of B's execution (URL mode), completed by the
    redirect the application's route receives; declining it fails the call in one line."""
    browsers, store = Browsers(), FileTokenStore(tmp_path / "state" / "oauth")
    config = {"url": f"{resource}/mcp", "auth": {"type": "oauth", "account": "conversation"}}
    options: dict[str, Any] = {"mcp_servers": {"docs": config}, "approval": "never", "warm": 0}
    async with Sessions(
        root=tmp_path / "root", mcp_authorize=browsers, mcp_token_store=store, **options
    ) as first:  # the first conversation authorizes when its session is made: through the callback
        await first.session("conversation-a")
    async with Sessions(root=tmp_path / "root", mcp_token_store=store, **options) as sessions:
        assert len(browsers.requests) == 1  # conversation-a's, stored
        a = await sessions.session("conversation-a")
        b = await sessions.session("conversation-b")
        async with b.executor.stream(ME) as run:
            question = await run.next_stop(questions=True)
            assert isinstance(question, ElicitationRequest), question
            assert question.conversation == "conversation-b" and question.server == "docs"
            assert question.url is not None and "code_challenge=" in question.url
            async with httpx2.AsyncClient(cookies={"user": "bob"}) as browser:  # Bob opens the link
                redirect = (await browser.get(question.url)).headers["location"]
            await sessions.complete_authorization(redirect)  # the application's redirect route
            result = await run.next_stop()
        assert isinstance(result, ExecutionResult) and result.text.strip() == "bob", result
        assert question.answer == ElicitationAnswer.accept()
        with pytest.raises(UnknownRedirect):  # used up: a replayed redirect completes nothing
            await sessions.complete_authorization(redirect)
        assert (await a.executor.execute(ME)).text.strip() == "alice"  # no question: its stored token

        c = await sessions.session("conversation-c")
        async with c.executor.stream(ME) as run:
            question = await run.next_stop(questions=True)
            assert isinstance(question, ElicitationRequest) and question.conversation == "conversation-c"
            await question.decline()
            refused = await run.next_stop()
        assert isinstance(refused, ExecutionResult) and refused.error is not None
        assert str(refused.error).endswith(
            "MCP server 'docs': OAuth authorization failed: the user did not authorize it (decline); "
            "authorize again (the next call asks again)"
        ), refused.error
    assert len(browsers.requests) == 1


async def test_without_a_callback_the_first_conversation_cannot_list_the_tools(
    resource: str, tmp_path: Path
) -> None:
    config = {"url": f"{resource}/mcp", "auth": {"type": "oauth", "account": "conversation"}}
    async with Sessions(
        root=tmp_path / "root", mcp_servers={"docs": config}, warm=0, mcp_token_store=MemoryTokenStore()
    ) as sessions:
        with pytest.raises(McpAuthorizationError) as raised:
            await sessions.session("conversation-a")
    assert "give Sessions mcp_authorize=" in str(raised.value) and "\n" not in str(raised.value)


def test_client_credentials_are_the_application_s_account() -> None:
    config = {
        "url": "https://billing.example/mcp",
        "auth": {
            "type": "oauth",
            "grant": "client_credentials",
            "client_id": "svc",
            "client_secret": "s",
            "account": "conversation",
        },
    }
    with pytest.raises(ConfigError, match='account "conversation" is for grant "authorization_code"'):
        parse_server_config("billing", config)
