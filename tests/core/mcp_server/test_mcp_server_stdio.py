"""``ipybox mcp`` over stdio, driven by the official MCP client in both protocol eras.

``legacy`` (the initialize handshake: Claude Code, Claude Desktop, Cursor) gets each approval as
an ``elicitation/create`` request in the middle of the call; ``auto`` (2026-07-28, the 2.x SDK's
default) gets it as an ``InputRequiredResult`` that the client answers and retries. The same tests
run against both.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import pytest_asyncio
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp_server_kit import (
    DISPLAY_PNG,
    PNG_SIGNATURE,
    TEST_SERVER,
    ClientActor,
    Elicitations,
    images_of,
    server_tree,
    stdio_client,
    text_of,
    wait_gone,
)
from mcp_types import INVALID_PARAMS

pytestmark = pytest.mark.asyncio(loop_scope="module")

TOOLS = {
    "execute_code",
    "register_mcp_server",
    "list_mcp_servers",
    "api_reference",
    "install_package",
    "reset",
    "cancel_waiting",
}


@dataclass
class Session:
    actor: ClientActor
    client: Client
    elicitations: Elicitations
    workspace: Path
    mode: str
    registered: str


@pytest_asyncio.fixture(loop_scope="module", scope="module", params=["legacy", "auto"])
async def session(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Session]:
    """One ``ipybox mcp`` per protocol mode; the module's last test closes it."""
    workspace = tmp_path_factory.mktemp("ws")
    elicitations = Elicitations()
    actor = ClientActor(stdio_client(workspace, mode=request.param, elicitations=elicitations))
    async with actor as client:
        result = await client.call_tool("register_mcp_server", {"name": "test", "config": TEST_SERVER})
        assert not result.is_error, text_of(result)
        yield Session(actor, client, elicitations, workspace, request.param, text_of(result))


async def execute(session: Session, code: str, *answers: str, **options: object) -> tuple[str, bool]:
    session.elicitations.answers[:] = list(answers)
    session.elicitations.messages.clear()
    result = await session.client.call_tool("execute_code", {"code": code, **options})
    return text_of(result), bool(result.is_error)


async def test_the_negotiated_protocol_is_the_one_asked_for(session: Session) -> None:
    version = session.client.session.protocol_version
    assert (version == "2026-07-28") == (session.mode == "auto"), version
    tools = await session.client.list_tools()
    assert {tool.name for tool in tools.tools} == TOOLS


async def test_registering_a_server_returns_its_signatures(session: Session) -> None:
    assert "from mcptools.test import" in session.registered
    assert "def add(*, a: int, b: int) -> int:" in session.registered


async def test_each_mcp_call_is_an_elicitation_and_decline_raises_permission_error(session: Session) -> None:
    code = (
        "from mcptools.test import add\n"
        "print('first', add(a=1, b=2))\n"
        "try:\n"
        "    add(a=20, b=22)\n"
        "except PermissionError as error:\n"
        "    print('rejected:', error)\n"
    )
    text, is_error = await execute(session, code, "accept", "decline")
    assert not is_error
    assert "first 3" in text
    assert "rejected: test.add was rejected: the user declined the MCP call" in text
    first, second = session.elicitations.messages
    assert "server: test" in first and "tool: add" in first and '"a": 1' in first and "read-only" in first
    assert '"a": 20' in second and '"b": 22' in second


async def test_cancel_in_the_client_rejects_the_call(session: Session) -> None:
    text, _ = await execute(
        session,
        "from mcptools.test import add\ntry:\n    add(a=1, b=1)\nexcept PermissionError as e:\n    print(e)",
        "cancel",
    )
    assert "dismissed the approval request" in text


async def test_state_persists_between_calls_and_images_come_back(session: Session) -> None:
    await execute(session, "counter = 41")
    text, _ = await execute(session, "counter + 1")
    assert text == "42"
    result = await session.client.call_tool("execute_code", {"code": DISPLAY_PNG})
    assert "displayed" in text_of(result)
    (png,) = images_of(result)
    assert png.startswith(PNG_SIGNATURE) and b"IHDR" in png


async def test_a_code_error_is_a_normal_result_with_the_traceback(session: Session) -> None:
    text, is_error = await execute(session, "def f():\n    return 1 / 0\nf()")
    assert not is_error
    assert "ZeroDivisionError" in text and "return 1 / 0" in text


async def test_a_timeout_is_an_error_result_and_the_kernel_survives(session: Session) -> None:
    await execute(session, "survivor = 'still here'")
    text, is_error = await execute(session, "import time\ntime.sleep(30)", timeout=1)
    assert is_error and "timeout and was interrupted" in text
    text, _ = await execute(session, "survivor")
    assert text == "'still here'"


async def test_output_is_cut_to_max_output_chars(session: Session) -> None:
    text, _ = await execute(session, "print('x' * 5000)", max_output_chars=500)
    assert len(text) < 600 and "characters omitted" in text


async def test_a_second_execution_while_one_waits_for_approval_is_refused(session: Session) -> None:
    session.elicitations.hold = asyncio.Event()
    session.elicitations.asked.clear()
    try:
        first = asyncio.create_task(
            session.client.call_tool("execute_code", {"code": "from mcptools.test import add\nadd(a=2, b=3)"})
        )
        await asyncio.wait_for(session.elicitations.asked.wait(), 60)
        text, is_error = await execute(session, "1 + 1")
        assert is_error and "still running or waiting for the user's approval" in text
    finally:
        session.elicitations.hold.set()
        session.elicitations.hold = None
    result = await first
    assert text_of(result) == "5"


async def test_listing_and_reference(session: Session) -> None:
    listing = text_of(await session.client.call_tool("list_mcp_servers", {}))
    assert listing.startswith("test: `mcptools.test`, ")
    reference = text_of(await session.client.call_tool("api_reference", {"servers": ["test"]}))
    assert "def create_order(" in reference
    unknown = await session.client.call_tool("api_reference", {"servers": ["nope"]})
    assert unknown.is_error and "unknown servers: nope" in text_of(unknown)


async def test_reset_clears_state_and_keeps_the_api(session: Session) -> None:
    await execute(session, "before_reset = 1")
    result = await session.client.call_tool("reset", {})
    assert "reset" in text_of(result)
    text, _ = await execute(session, "before_reset")
    assert "NameError" in text
    text, _ = await execute(session, "from mcptools.test import add\nadd(a=3, b=4)", "accept")
    assert text == "7"


async def test_an_unknown_tool_or_prompt_is_a_protocol_error_with_the_invalid_params_code(
    session: Session,
) -> None:
    """The codes the specification names (-32602), not an ``isError`` result or code 0."""
    with pytest.raises(MCPError) as tool:
        await session.client.call_tool("no_such_tool", {})
    assert (tool.value.code, tool.value.error.message) == (INVALID_PARAMS, "Unknown tool: no_such_tool")
    with pytest.raises(MCPError) as prompt:
        await session.client.get_prompt("no_such_prompt")
    assert (prompt.value.code, prompt.value.error.message) == (
        INVALID_PARAMS,
        "Unknown prompt: no_such_prompt",
    )
    assert not (await session.client.call_tool("list_mcp_servers", {})).is_error  # a known one still works


async def test_closing_the_client_stops_the_kernel_and_every_mcp_server(session: Session) -> None:
    """Runs last (pytest keeps file order within a module fixture's parameter)."""
    tree = server_tree(session.workspace)
    # ipybox mcp, its kernel, the test MCP server (and whatever those started)
    assert len(tree) >= 3, tree
    await session.actor.__aexit__(None, None, None)
    assert await wait_gone(tree) == set()
