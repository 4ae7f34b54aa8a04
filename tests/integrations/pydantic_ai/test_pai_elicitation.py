"""An MCP server's question during a call of the code, with PydanticAI's CodeAction: declined with a
reason the model can read, answered by the application's ``CodeExecutor(mcp_elicit=...)``, or,
with ``CodeAction(elicitation=True)``, a PydanticAI deferred question (``CallDeferred(kind="question")``)
answered in ``DeferredToolResults.calls``, inline or in the next run.

Real kernels, the real stdio elicit server (tests/servers/elicit_server.py: ``book`` asks how many
seats and returns what it got); only the model is scripted.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from pai_kit import ScriptedModel, returns_of, roundtrip, stream_run, text_of
from pydantic_ai import (
    Agent,
    DeferredToolRequests,
    DeferredToolRequestsEvent,
    DeferredToolResults,
    DeferredToolResultsEvent,
    RunContext,
)
from pydantic_ai.capabilities import HandleDeferredToolCalls

from ipybox_core import CodeExecutor
from ipybox_core.mcp.elicitation import ElicitationAnswer, ElicitationRequest
from ipybox_integrations.pydantic_ai import CodeAction
from ipybox_integrations.pydantic_ai._execute import NOT_ASKED
from servers.executors import ELICIT_SERVER, left_idle

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


# --- CodeAction(elicitation=True): the question is a PydanticAI deferred question -------------------

COUNTED_BOOK = "runs = globals().get('runs', 0) + 1\nfrom mcptools.elicit import book\nprint(runs, book(flight='{flight}'))"
"""Books and counts how often the code ran in this kernel (the question must not run it twice)."""


@pytest_asyncio.fixture(loop_scope="package", scope="module")
async def elicit_executor(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[CodeExecutor]:
    """A kernel with the elicit server and no mcp_elicit: its questions are the execution's events."""
    async with CodeExecutor(
        workspace=tmp_path_factory.mktemp("pai-elicit"),
        approval="never",
        mcp_servers={"elicit": ELICIT_SERVER},
    ) as executor:
        yield executor


@pytest_asyncio.fixture(loop_scope="package")
async def executor(elicit_executor: CodeExecutor) -> AsyncIterator[CodeExecutor]:
    """The module's executor, its count of runs of the code reset."""
    await elicit_executor.execute("runs = 0")
    async with left_idle(elicit_executor) as ex:
        yield ex


def asking_agent(executor: CodeExecutor, model: ScriptedModel, *capabilities: Any) -> Agent[None, Any]:
    """A fresh agent (and CodeAction) around ``executor``, as an app building its agent per request."""
    return Agent(
        model.model,
        capabilities=[CodeAction(executor, elicitation=True), *capabilities],
        output_type=[str, DeferredToolRequests],
    )


async def answer(agent: Agent[None, Any], result: Any, value: Any) -> Any:
    """Resume ``result`` (a deferred question) with ``value`` for its one call, the PydanticAI way."""
    assert isinstance(result.output, DeferredToolRequests), result.output
    (call,) = result.output.calls
    return await agent.run(
        message_history=roundtrip(result.all_messages()),
        deferred_tool_results=result.output.build_results(calls={call.tool_call_id: value}),
    )


async def test_a_question_is_a_deferred_question_answered_with_the_forms_values(
    executor: CodeExecutor,
) -> None:
    model = ScriptedModel([COUNTED_BOOK.format(flight="PA3")])
    agent = asking_agent(executor, model)
    result = await agent.run("go")
    requests = result.output
    assert isinstance(requests, DeferredToolRequests)  # was: TypeError (no elicitation=)
    (call,) = requests.calls
    assert requests.kind(call.tool_call_id) == "question"
    assert (call.tool_name, call.tool_call_id, call.args_as_dict()["message"]) == (
        "book",
        "call_0_0",
        "How many seats on PA3?",
    )
    asked = requests.metadata["call_0_0"]["elicitation"]
    assert (asked["server"], asked["tool"], asked["message"]) == ("elicit", "book", "How many seats on PA3?")
    assert set(asked["schema"]["properties"]) == {"seats", "window"}
    result = await answer(agent, result, {"seats": 2})
    assert [text_of(part) for part in returns_of(result)] == ["1 PA3: 2 seat(s), aisle"]


async def test_content_the_form_refuses_is_asked_again_with_the_reason(executor: CodeExecutor) -> None:
    model = ScriptedModel([COUNTED_BOOK.format(flight="PA4")])
    agent = asking_agent(executor, model)
    result = await answer(agent, await agent.run("go"), {"seats": 20})  # the form allows 1..9
    assert isinstance(result.output, DeferredToolRequests)
    error = result.output.metadata["call_0_0"]["elicitation"]["error"]
    assert "seats" in error and "9" in error
    result = await answer(agent, result, {"action": "accept", "content": {"seats": 3, "window": True}})
    assert [text_of(part) for part in returns_of(result)] == ["1 PA4: 3 seat(s), window"]


@pytest.mark.parametrize(
    ("value", "said"), [({"action": "decline"}, "decline"), (ElicitationAnswer.cancel(), "cancel")]
)
async def test_decline_and_cancel_reach_the_server(executor: CodeExecutor, value: Any, said: str) -> None:
    model = ScriptedModel([COUNTED_BOOK.format(flight="PA5")])
    agent = asking_agent(executor, model)
    result = await answer(agent, await agent.run("go"), value)
    assert [text_of(part) for part in returns_of(result)] == [f"1 PA5: {said}"]


async def test_rebuilt_agents_pick_the_question_up_and_the_code_runs_once(executor: CodeExecutor) -> None:
    model = ScriptedModel([COUNTED_BOOK.format(flight="PA6")])
    result = await asking_agent(executor, model).run("go")
    result = await answer(asking_agent(executor, model), result, {"seats": 0})  # refused: asked again
    assert isinstance(result.output, DeferredToolRequests)
    result = await answer(asking_agent(executor, model), result, {"seats": 5})
    assert [text_of(part) for part in returns_of(result)] == ["1 PA6: 5 seat(s), aisle"]


async def test_a_handler_answers_the_question_inline_and_is_asked_again_when_refused(
    executor: CodeExecutor,
) -> None:
    seen: list[dict[str, Any]] = []

    async def handler(ctx: RunContext[Any], requests: DeferredToolRequests) -> DeferredToolResults:
        (call,) = requests.calls
        assert requests.kind(call.tool_call_id) == "question"
        seen.append(dict(requests.metadata[call.tool_call_id]["elicitation"]))
        seats = 99 if len(seen) == 1 else 7
        return requests.build_results(calls={call.tool_call_id: {"seats": seats}})

    model = ScriptedModel([COUNTED_BOOK.format(flight="PA7")])
    agent = asking_agent(executor, model, HandleDeferredToolCalls(handler=handler))
    events, result = await stream_run(agent, "go")
    assert [text_of(part) for part in returns_of(result)] == ["1 PA7: 7 seat(s), aisle"]
    assert "error" not in seen[0] and "seats" in seen[1]["error"]
    # The frontend sees each question as a native deferred question's events.
    requested = [e.requests for e in events if isinstance(e, DeferredToolRequestsEvent)]
    assert [r.kind(r.calls[0].tool_call_id) for r in requested] == ["question", "question"]
    answered = [e.results.calls for e in events if isinstance(e, DeferredToolResultsEvent)]
    assert [list(calls.values()) for calls in answered] == [[{"seats": 99}], [{"seats": 7}]]


async def test_an_approval_then_a_question_in_one_call_of_the_code(tmp_path: Path) -> None:
    """The ``book`` call itself needs approval (policy "always"), then the server asks; an
    approval's answer given for the question is ignored and the question asked again."""
    async with CodeExecutor(workspace=tmp_path, mcp_servers={"elicit": ELICIT_SERVER}) as executor:
        model = ScriptedModel([COUNTED_BOOK.format(flight="PA8")])
        agent = asking_agent(executor, model)
        result = await agent.run("go")
        assert isinstance(result.output, DeferredToolRequests)
        assert [call.tool_name for call in result.output.approvals] == ["book"]
        result = await agent.run(
            message_history=roundtrip(result.all_messages()),
            deferred_tool_results=result.output.build_results(approve_all=True),
        )
        assert isinstance(result.output, DeferredToolRequests)
        assert [call.tool_name for call in result.output.calls] == ["book"]  # now the question
        ignored = await agent.run(  # an approval for a question: no answer, asked again
            message_history=roundtrip(result.all_messages()),
            deferred_tool_results=DeferredToolResults(approvals={"call_0_0": True}),
        )
        assert isinstance(ignored.output, DeferredToolRequests)
        assert "note" in ignored.output.metadata["call_0_0"]
        result = await answer(agent, ignored, {"seats": 1, "window": True})
    assert [text_of(part) for part in returns_of(result)] == ["1 PA8: 1 seat(s), window"]


async def test_a_new_prompt_while_the_question_waits_cancels_the_code(executor: CodeExecutor) -> None:
    model = ScriptedModel([COUNTED_BOOK.format(flight="PA9"), "print('next')"])
    agent = asking_agent(executor, model)
    result = await agent.run("go")
    assert isinstance(result.output, DeferredToolRequests)
    moved_on = await agent.run("something else", message_history=result.all_messages())
    assert not executor.busy
    assert text_of(returns_of(moved_on)[-1]) == "next"
