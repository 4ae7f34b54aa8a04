"""An MCP server's question during a call of the code is a LangGraph interrupt of execute_code
(``CodeActionMiddleware(elicitation=True)``), answered with ``Command(resume={"action": ...})``.

Real kernel, the real stdio elicit server (tests/servers/elicit_server.py: ``book`` asks how many
seats and returns what it got), real checkpointers; only the chat model is scripted.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from langchain_core.messages import AIMessage, BaseMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Interrupt
from lc_kit import (
    APPROVE,
    action,
    config,
    make_agent,
    only_interrupt,
    resume,
    run_code_then_finish,
    text_of,
    tool_call,
    tool_messages,
    user,
)

from example_runner import documented, run_example
from ipybox_core import CodeExecutor
from ipybox_core.approval import ApprovalRules
from ipybox_integrations.langchain import CodeActionMiddleware
from ipybox_integrations.langchain._elicit import NOT_ASKED
from servers.executors import ELICIT_SERVER, left_idle

pytestmark = pytest.mark.asyncio(loop_scope="package")

BOOK = "from mcptools.elicit import book, nap, answers_seen\n"
SCHEMA_KEYS = {"seats", "window"}


@pytest_asyncio.fixture(loop_scope="package", scope="package")
async def elicit_executor(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[CodeExecutor]:
    """A kernel with the elicit server (``book`` and ``answers_seen`` run unasked, ``nap`` asks)."""
    async with CodeExecutor(
        workspace=tmp_path_factory.mktemp("lc-elicit-ws"),
        timeout=60,
        approval=ApprovalRules(allow=["elicit.book", "elicit.answers_seen"]),
        mcp_servers={"elicit": ELICIT_SERVER},
    ) as executor:
        yield executor


@pytest_asyncio.fixture(loop_scope="package")
async def executor(elicit_executor: CodeExecutor) -> AsyncIterator[CodeExecutor]:
    async with left_idle(elicit_executor) as ex:
        yield ex


def asked(interrupt: Interrupt) -> dict[str, Any]:
    """The question of an ``elicitation`` interrupt."""
    assert set(interrupt.value) == {"elicitation"}, interrupt.value
    question: dict[str, Any] = interrupt.value["elicitation"]
    return question


def accept(**content: Any) -> dict[str, Any]:
    return {"action": "accept", "content": content}


async def test_accepted_content_reaches_the_server_and_the_code_goes_on_to_its_next_approval(
    executor: CodeExecutor,
) -> None:
    code = f"{BOOK}print(book(flight='LH1'))\nprint(nap(seconds=0))"
    _, agent = make_agent([CodeActionMiddleware(executor, elicitation=True)], run_code_then_finish(code))
    first = only_interrupt(await agent.ainvoke(user(), config("el-accept"), version="v2"))
    question = asked(first)  # was: the question was declined, the run ended without an interrupt
    assert {key: question[key] for key in ("tool_call_id", "server", "tool", "message")} == {
        "tool_call_id": "call_1_0",
        "server": "elicit",
        "tool": "book",
        "message": "How many seats on LH1?",
    }
    assert set(question["schema"]["properties"]) == SCHEMA_KEYS and "url" not in question
    assert "error" not in question

    approval = only_interrupt(await resume(agent, "el-accept", accept(seats=3, window=True)))
    assert action(approval)["name"] == "elicit.nap"  # the execution went on to its next stop
    out = await resume(agent, "el-accept", APPROVE)
    assert not out.interrupts
    assert [text_of(message) for message in tool_messages(out.value)] == ["LH1: 3 seat(s), window\nrested"]


@pytest.mark.parametrize("answer", ["decline", "cancel"])
async def test_decline_and_cancel_reach_the_server(executor: CodeExecutor, answer: str) -> None:
    code = f"{BOOK}print(book(flight='LH2'))"
    _, agent = make_agent([CodeActionMiddleware(executor, elicitation=True)], run_code_then_finish(code))
    asked(only_interrupt(await agent.ainvoke(user(), config(f"el-{answer}"), version="v2")))
    out = await resume(agent, f"el-{answer}", {"action": answer})
    assert not out.interrupts
    assert [text_of(message) for message in tool_messages(out.value)] == [f"LH2: {answer}"]


async def test_content_the_schema_refuses_is_asked_again_with_the_problem(executor: CodeExecutor) -> None:
    code = f"{BOOK}print(book(flight='LH3'))"
    _, agent = make_agent([CodeActionMiddleware(executor, elicitation=True)], run_code_then_finish(code))
    asked(only_interrupt(await agent.ainvoke(user(), config("el-bad"), version="v2")))

    with pytest.raises(ValueError, match="validation error"):  # not an answer at all: nothing saved
        await resume(agent, "el-bad", {"action": "maybe"})
    again = asked(only_interrupt(await resume(agent, "el-bad", accept(seats=12))))
    assert again["message"] == "How many seats on LH3?"
    assert (
        again["error"]
        == "the content does not match the requested schema: seats: 12 is greater than the maximum of 9"
    )
    assert executor.busy  # the call still waits for an answer; the server got none

    out = await resume(agent, "el-bad", accept(seats=2))
    assert not out.interrupts
    assert [text_of(message) for message in tool_messages(out.value)] == ["LH3: 2 seat(s), aisle"]


async def test_a_rebuilt_agent_answers_the_question_of_the_execution_waiting_in_its_executor(
    executor: CodeExecutor,
) -> None:
    saver = InMemorySaver()
    code = (
        f"{BOOK}runs_el = globals().get('runs_el', 0) + 1\n"
        "print(book(flight='LH4'), book(flight='LH5'), runs_el)"
    )

    def agent() -> Any:
        middleware = CodeActionMiddleware(executor, elicitation=True)
        return make_agent([middleware], run_code_then_finish(code), checkpointer=saver)[1]

    assert asked(only_interrupt(await agent().ainvoke(user(), config("el-fresh"), version="v2")))[
        "message"
    ] == ("How many seats on LH4?")
    second = only_interrupt(await resume(agent(), "el-fresh", accept(seats=4)))
    assert asked(second)["message"] == "How many seats on LH5?"
    out = await resume(agent(), "el-fresh", {"action": "decline"})
    assert not out.interrupts
    # the code ran once, though three agents entered execute_code
    assert [text_of(message) for message in tool_messages(out.value)] == [
        "LH4: 4 seat(s), aisle LH5: decline 1"
    ]


async def test_new_input_cancels_an_execution_waiting_for_an_answer(executor: CodeExecutor) -> None:
    before = int((await executor.execute(f"{BOOK}print(len(answers_seen(count=0)))")).text)
    seen = f"{BOOK}print(answers_seen(count={before + 1})[{before}:])"

    def script(messages: list[BaseMessage]) -> AIMessage:
        last = messages[-1]
        if last.type == "human" and last.text == "book":
            return AIMessage(content="", tool_calls=[tool_call(f"{BOOK}print(book(flight='LH6'))", "call_b")])
        if last.type == "human":  # what the server was told
            return AIMessage(content="", tool_calls=[tool_call(seen, "call_s")])
        return AIMessage(content="done")

    _, agent = make_agent([CodeActionMiddleware(executor, elicitation=True)], script)
    asked(only_interrupt(await agent.ainvoke(user("book"), config("el-moved"), version="v2")))
    out = await agent.ainvoke(user("something else"), config("el-moved"), version="v2")
    assert not out.interrupts
    messages = tool_messages(out.value)
    assert messages[0].tool_call_id == "call_b" and "abandoned" in text_of(messages[0])
    # was: the waiting execution was not cancelled, so the new call found the kernel busy
    assert messages[1].tool_call_id == "call_s" and text_of(messages[1]).startswith("['LH6: decline']")


async def test_without_the_flag_the_question_is_declined_and_the_code_is_told_why(
    executor: CodeExecutor,
) -> None:
    code = f"{BOOK}print(book(flight='LH7'))"
    _, agent = make_agent([CodeActionMiddleware(executor)], run_code_then_finish(code))
    out = await agent.ainvoke(user(), config("el-off"), version="v2")
    assert not out.interrupts  # an app that knows only approval interrupts sees none new
    (message,) = tool_messages(out.value)
    assert "LH7: decline" in text_of(message)
    assert NOT_ASKED in text_of(message)  # was: a reason about event consumers the model cannot act on


async def test_the_example_answers_the_order_form_after_a_refused_quantity() -> None:
    out = (await asyncio.to_thread(run_example, "langchain_elicitation.py")).stdout.splitlines()
    lines = [
        "checkout.checkout asks: Order b-101?",
        "refused: the content does not match the requested schema: quantity: 9 is greater than the maximum of 5",
        "checkout.checkout asks: Order b-101?",
        "result: ordered 2 x b-101, express shipping",
    ]
    assert out[:4] == lines
    documented("frameworks/langchain.md", *lines)


async def test_answers_keyed_by_interrupt_id_in_the_per_call_mode(executor: CodeExecutor) -> None:
    code = f"{BOOK}print(book(flight='LH8'))\nprint(nap(seconds=0))"
    middleware = CodeActionMiddleware(executor, elicitation=True, interrupt_mode="per_call")
    _, agent = make_agent([middleware], run_code_then_finish(code))
    first = only_interrupt(await agent.ainvoke(user(), config("el-keyed"), version="v2"))
    assert asked(first)["message"] == "How many seats on LH8?"
    refused = only_interrupt(await resume(agent, "el-keyed", {first.id: accept(seats=0)}))
    assert "seats: 0 is less than the minimum of 1" in asked(refused)["error"]
    approval = only_interrupt(await resume(agent, "el-keyed", {refused.id: accept(seats=1)}))
    assert (approval.value["type"], approval.value["name"]) == ("tool_approval", "elicit.nap")
    out = await resume(agent, "el-keyed", {approval.id: {"type": "approve"}})
    assert not out.interrupts
    assert [text_of(message) for message in tool_messages(out.value)] == ["LH8: 1 seat(s), aisle\nrested"]


async def test_a_run_without_an_answer_asks_the_same_question_again(executor: CodeExecutor) -> None:
    code = f"{BOOK}print(book(flight='LH9'), book(flight='LH10'))"
    _, agent = make_agent([CodeActionMiddleware(executor, elicitation=True)], run_code_then_finish(code))
    asked(only_interrupt(await agent.ainvoke(user(), config("el-none"), version="v2")))
    second = only_interrupt(await resume(agent, "el-none", accept(seats=5)))
    assert asked(second)["message"] == "How many seats on LH10?"
    # no answer: the consumed answer to LH9 is not taken for LH10's (langgraph#8837)
    again = only_interrupt(await agent.ainvoke(None, config("el-none"), version="v2"))
    assert asked(again)["message"] == "How many seats on LH10?"
    out = await resume(agent, "el-none", {"action": "cancel"})
    assert [text_of(message) for message in tool_messages(out.value)] == [
        "LH9: 5 seat(s), aisle LH10: cancel"
    ]
