"""An MCP server's question during a call of the code, with PydanticAI's CodeAction: declined with a
reason the model can read, or answered by the application's ``CodeExecutor(mcp_elicit=...)``.

Real kernels, the real stdio elicit server (tests/servers/elicit_server.py: ``book`` asks how many
seats and returns what it got); only the model is scripted.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from pai_kit import ScriptedModel, returns_of, text_of
from pydantic_ai import Agent

from ipybox_core import CodeExecutor
from ipybox_core.mcp.elicitation import ElicitationAnswer, ElicitationRequest
from ipybox_integrations.pydantic_ai import CodeAction
from ipybox_integrations.pydantic_ai._execute import NOT_ASKED
from servers.executors import ELICIT_SERVER

pytestmark = pytest.mark.asyncio(loop_scope="package")

BOOK = "from mcptools.elicit import book\nprint(book(flight='{flight}'))"


async def test_a_question_is_declined_and_the_code_is_told_why(tmp_path: Path) -> None:
    async with CodeExecutor(
        workspace=tmp_path, approval="never", mcp_servers={"elicit": ELICIT_SERVER}
    ) as executor:
        model = ScriptedModel([BOOK.format(flight="PA1")])
        result = await Agent(model.model, capabilities=[CodeAction(executor)]).run("go")
    (returned,) = returns_of(result)
    assert text_of(returned).startswith("PA1: decline")
    assert NOT_ASKED in text_of(returned)  # was: a reason about event consumers the model cannot act on


async def test_the_applications_mcp_elicit_callback_answers_instead(tmp_path: Path) -> None:
    asked: list[str] = []

    async def elicit(question: ElicitationRequest) -> ElicitationAnswer:
        asked.append(question.message)
        return ElicitationAnswer.accept({"seats": 2})

    async with CodeExecutor(
        workspace=tmp_path, approval="never", mcp_servers={"elicit": ELICIT_SERVER}, mcp_elicit=elicit
    ) as executor:
        model = ScriptedModel([BOOK.format(flight="PA2")])
        result = await Agent(model.model, capabilities=[CodeAction(executor)]).run("go")
    assert asked == ["How many seats on PA2?"]
    assert [text_of(part) for part in returns_of(result)] == ["PA2: 2 seat(s), aisle"]
