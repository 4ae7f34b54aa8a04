"""Sessions: an MCP server's question during a conversation's call is an event of that conversation's
execution (as in a single CodeExecutor), never shown to another conversation. One shared stdio
server (tests/servers/elicit_server.py) asks and reports what it got; real kernels call it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from core.mcp.test_mcp_elicitation_events import SERVER
from ipybox_core import Sessions
from ipybox_core.executor import ExecutionResult
from ipybox_core.mcp.elicitation import ElicitationAnswer, ElicitationRequest

pytestmark = pytest.mark.asyncio(loop_scope="module")

BOOK = "from mcptools.elicit import book\nprint(book(flight={flight!r}))"


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def sessions(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Sessions]:
    root = tmp_path_factory.mktemp("root")
    async with Sessions(root=root, mcp_servers={"elicit": SERVER}, approval="never", warm=0, timeout=60) as s:
        yield s


async def test_a_question_is_an_event_of_the_asking_conversation_only(sessions: Sessions) -> None:
    alice, bob = await sessions.session("alice"), await sessions.session("bob")
    async with alice.executor.stream(BOOK.format(flight="A1")) as asking:
        question = await asking.next_stop(questions=True)
        assert isinstance(question, ElicitationRequest), question  # was: declined, nobody asked
        assert (question.server, question.tool, question.conversation) == ("elicit", "book", "alice")
        assert question.message == "How many seats on A1?" and question.pending

        # Bob's conversation goes on meanwhile on the same server and never sees Alice's question.
        async with bob.executor.stream("from mcptools.elicit import nap\nprint(nap(seconds=0))") as other:
            bob_events = [event async for event in other]
        assert not any(isinstance(event, ElicitationRequest) for event in bob_events)
        bob_result = bob_events[-1]
        assert isinstance(bob_result, ExecutionResult) and bob_result.text.strip() == "rested"

        await question.accept({"seats": 2, "window": True})
        result = await asking.next_stop()
    assert isinstance(result, ExecutionResult) and result.ok, result
    assert "A1: 2 seat(s), window" in result.text
    assert question.answer == ElicitationAnswer.accept({"seats": 2, "window": True})


async def test_the_application_s_elicit_callback_is_told_the_conversation(tmp_path: Path) -> None:
    asked: list[ElicitationRequest] = []

    async def elicit(request: ElicitationRequest) -> ElicitationAnswer:
        asked.append(request)
        return ElicitationAnswer.accept({"seats": 4})

    async with Sessions(
        root=tmp_path / "root", mcp_servers={"elicit": SERVER}, approval="never", warm=0, mcp_elicit=elicit
    ) as sessions:
        carol = await sessions.session("carol")
        result = await carol.executor.execute(BOOK.format(flight="C1"))
    assert "C1: 4 seat(s), aisle" in result.text, result.text
    assert [(request.conversation, request.tool) for request in asked] == [("carol", "book")]


async def test_a_question_while_two_conversations_call_the_server_is_shown_to_neither(
    sessions: Sessions,
) -> None:
    """The attack: the shared server asks during Alice's call while Bob's call of it runs too. The
    server does not say which call asks, so the question goes to nobody (declined, Alice's code told
    why). The control: Bob's own question, asked while he alone was calling, is his event."""
    alice, bob = await sessions.session("alice"), await sessions.session("bob")
    async with bob.executor.stream(BOOK.format(flight="B2")) as bobs:
        bobs_question = await bobs.next_stop(questions=True)  # his call waits for his answer
        assert isinstance(bobs_question, ElicitationRequest) and bobs_question.conversation == "bob"
        async with alice.executor.stream(BOOK.format(flight="A2")) as asking:
            stop = await asking.next_stop(questions=True)
        assert isinstance(stop, ExecutionResult), stop  # no question for Alice (nor for Bob)
        assert "A2: decline" in stop.text
        assert "2 conversations were calling MCP server 'elicit'" in stop.text
        assert bobs_question.pending
        await bobs_question.accept({"seats": 5})
        bob_stop = await bobs.next_stop()
    assert isinstance(bob_stop, ExecutionResult) and "B2: 5 seat(s), aisle" in bob_stop.text
