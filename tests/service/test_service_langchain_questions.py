"""LangChain's ``CodeActionMiddleware(elicitation=True)`` over ``RemoteSessions``: an upstream MCP
server's question during a call of the code is a LangGraph interrupt, and the resumed answer reaches
the server through ``ipybox serve``, with no change to the adapter (issue 27). The real
``tests/servers/elicit_server.py`` asks; only the chat model is scripted."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from service_kit import TOKEN, Service
from test_service_questions import elicit_service

from ipybox_core.remote import RemoteSessions
from ipybox_integrations.langchain import CodeActionMiddleware

sys.path.insert(0, str(Path(__file__).parents[1] / "integrations" / "langchain"))

from lc_kit import (
    config,
    make_agent,
    only_interrupt,
    resume,
    run_code_then_finish,
    text_of,
    tool_messages,
    user,
)


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    """An ``ipybox serve --yes`` with the ``elicit`` server."""
    with_elicit = elicit_service(tmp_path_factory)
    yield with_elicit
    assert with_elicit.stop() == 0


def test_a_servers_question_is_an_interrupt_and_the_answer_reaches_the_server(
    service: Service, conversation: str
) -> None:
    code = "from mcptools.elicit import book\nprint(book(flight='LH7'))"

    async def main() -> tuple[dict[str, object], list[str]]:
        async with RemoteSessions(service.url, token=TOKEN, client_name="lc") as sessions:
            middleware = CodeActionMiddleware(sessions, elicitation=True)
            _, agent = make_agent([middleware], run_code_then_finish(code))
            first = only_interrupt(await agent.ainvoke(user(), config(conversation), version="v2"))
            out = await resume(agent, conversation, {"action": "accept", "content": {"seats": 4}})
            assert not out.interrupts
            return first.value, [text_of(message) for message in tool_messages(out.value)]

    shown, texts = asyncio.run(main())
    question = shown["elicitation"]
    assert isinstance(question, dict)
    assert (question["server"], question["tool"], question["message"]) == (
        "elicit",
        "book",
        "How many seats on LH7?",
    )
    assert texts == ["LH7: 4 seat(s), aisle"]  # was: declined unasked, no interrupt
