"""``ipybox mcp`` over Streamable HTTP, driven by the official MCP client in both protocol eras."""

from __future__ import annotations

import signal
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import pytest_asyncio
from mcp import Client
from mcp_server_kit import (
    DISPLAY_PNG,
    ECHO_SERVER,
    PNG_SIGNATURE,
    TEST_SERVER,
    ClientActor,
    Elicitations,
    HttpIpybox,
    images_of,
    server_tree,
    start_http_ipybox,
    text_of,
    wait_gone,
)

pytestmark = pytest.mark.asyncio(loop_scope="module")

CALL_TWICE = (
    "from mcptools.test import add\n"
    "print('first', add(a=1, b=2))\n"
    "try:\n"
    "    add(a=5, b=5)\n"
    "except PermissionError as error:\n"
    "    print('rejected:', error)\n"
)


@dataclass
class Session:
    client: Client
    elicitations: Elicitations
    mode: str


@pytest.fixture(scope="module")
def http_ipybox(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpIpybox]:
    server = start_http_ipybox(tmp_path_factory.mktemp("ws"))
    yield server
    assert server.stop() == 0


@pytest_asyncio.fixture(loop_scope="module", scope="module", params=["legacy", "auto"])
async def session(request: pytest.FixtureRequest, http_ipybox: HttpIpybox) -> AsyncIterator[Session]:
    elicitations = Elicitations()
    client = http_ipybox.client(mode=request.param, elicitations=elicitations)
    async with ClientActor(client):
        result = await client.call_tool("register_mcp_server", {"name": "test", "config": TEST_SERVER})
        assert not result.is_error, text_of(result)
        yield Session(client, elicitations, request.param)


async def test_mcp_calls_are_approved_through_elicitation(session: Session) -> None:
    session.elicitations.answers[:] = ["accept", "decline"]
    session.elicitations.messages.clear()
    result = await session.client.call_tool("execute_code", {"code": CALL_TWICE})
    text = text_of(result)
    assert not result.is_error
    assert "first 3" in text and "rejected: test.add was rejected: the user declined" in text
    assert len(session.elicitations.messages) == 2
    assert '"a": 5' in session.elicitations.messages[1]


async def test_images_and_errors(session: Session) -> None:
    result = await session.client.call_tool("execute_code", {"code": DISPLAY_PNG})
    (png,) = images_of(result)
    assert png.startswith(PNG_SIGNATURE)
    result = await session.client.call_tool("execute_code", {"code": "undefined_name"})
    assert not result.is_error and "NameError" in text_of(result)


async def test_a_client_without_elicitation_gets_a_clear_message(
    session: Session, http_ipybox: HttpIpybox
) -> None:
    async with ClientActor(http_ipybox.client(mode=session.mode)) as plain:
        await plain.call_tool("register_mcp_server", {"name": "test", "config": TEST_SERVER})
        result = await plain.call_tool(
            "execute_code",
            {
                "code": "from mcptools.test import add\ntry:\n    add(a=1, b=2)\nexcept PermissionError as e:\n    print(e)"
            },
        )
    text = text_of(result)
    assert "does not support elicitation" in text and "ipybox mcp --yes" in text


async def test_sigint_stops_the_server_the_kernel_and_every_mcp_server(tmp_path: Path) -> None:
    server = start_http_ipybox(tmp_path / "ws", "--yes")
    try:
        async with ClientActor(server.client()) as client:
            await client.call_tool("register_mcp_server", {"name": "echo", "config": ECHO_SERVER})
            result = await client.call_tool(
                "execute_code", {"code": "from mcptools.echo import echo\necho(text='hi')"}
            )
            assert text_of(result) == "'hi'"
        tree = server_tree(tmp_path / "ws")
        assert len(tree) >= 3, tree
    finally:
        exit_code = server.stop(signal.SIGINT)
    assert exit_code == 0
    assert await wait_gone(tree) == set()
