"""An MCP server's question during a call of the code is an event of the execution that made the call
(a CodeExecutor without ``mcp_elicit``): answered from the events, declined when nobody answers, and
its answer time not counted against the call's or the execution's timeout. A real stdio MCP server
(tests/servers/elicit_server.py) asks and reports what it got; real kernels call it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from ipybox_core import CodeExecutor
from ipybox_core.errors import ExecutionCancelled
from ipybox_core.executor import Execution, ExecutionEvent, ExecutionResult, OutputChunk
from ipybox_core.mcp.elicitation import (
    ElicitationAnswer,
    ElicitationContentError,
    ElicitationError,
    ElicitationRequest,
)
from servers import PYTHON, SERVERS_DIR

pytestmark = pytest.mark.asyncio(loop_scope="module")

SERVER = {
    "command": PYTHON,
    "args": [str(SERVERS_DIR / "elicit_server.py")],
    "env": {"PYTHONUNBUFFERED": "1"},
}
BOOK = "from mcptools.elicit import book\n"


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def executor(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[CodeExecutor]:
    async with CodeExecutor(
        workspace=tmp_path_factory.mktemp("ws"), approval="never", mcp_servers={"elicit": SERVER}, timeout=60
    ) as ex:
        yield ex


async def until_question(execution: Execution, seen: list[ExecutionEvent]) -> ElicitationRequest:
    """The execution's events up to its first question (the events before it go to ``seen``)."""
    async for event in execution:
        if isinstance(event, ElicitationRequest):
            return event
        seen.append(event)
    raise AssertionError(f"the execution ended without a question: {seen}")


async def result_of(execution: Execution) -> ExecutionResult:
    async for event in execution:
        if isinstance(event, ExecutionResult):
            return event
    raise AssertionError("no result")


def printed(events: list[ExecutionEvent]) -> str:
    return "".join(event.text for event in events if isinstance(event, OutputChunk))


async def test_accepted_answer_reaches_the_tool_after_the_output_before_the_call(
    executor: CodeExecutor,
) -> None:
    seen: list[ExecutionEvent] = []
    async with executor.stream(f"print('about to book', flush=True)\n{BOOK}print(book(flight='LH1'))") as run:
        question = await until_question(run, seen)
        assert "about to book" in printed(seen)  # in order: what the code printed before it asked
        assert (question.server, question.tool, question.message) == (
            "elicit",
            "book",
            "How many seats on LH1?",
        )
        assert question.defaults == {"seats": 1, "window": False} and question.url is None
        assert question.pending and run.pending_questions == [question]
        await question.accept({"seats": 3, "window": True})
        result = await result_of(run)
    assert result.error is None, result.error
    assert "LH1: 3 seat(s), window" in result.text
    assert question.answer == ElicitationAnswer.accept({"seats": 3, "window": True})
    with pytest.raises(ElicitationError, match="answered already"):
        await question.decline()


async def test_declined_question_reaches_the_tool(executor: CodeExecutor) -> None:
    async with executor.stream(f"{BOOK}print(book(flight='LH2'))") as run:
        question = await until_question(run, [])
        await question.decline()
        result = await result_of(run)
    assert "LH2: decline" in result.text


async def test_content_that_breaks_the_schema_leaves_the_question_open(executor: CodeExecutor) -> None:
    async with executor.stream(f"{BOOK}print(book(flight='LH3'))") as run:
        question = await until_question(run, [])
        with pytest.raises(ElicitationContentError, match="seats: 99 is greater than the maximum of 9"):
            await question.accept({"seats": 99})
        assert question.pending
        await question.accept()  # the schema's defaults
        result = await result_of(run)
    assert "LH3: 1 seat(s), aisle" in result.text


async def test_a_consumer_that_goes_on_without_answering_declines(executor: CodeExecutor) -> None:
    """A consumer that does not know questions (it asks for the next event) gets today's decline."""
    async with executor.stream(f"{BOOK}print(book(flight='LH4'))") as run:
        question = await until_question(run, [])
        result = await result_of(run)
    assert question.answer is not None and question.answer.action == "decline"
    assert "LH4: decline" in result.text
    assert "asked for its next event without answering" in result.text  # the code is told why


async def test_next_stop_declines_a_question_unless_asked_to_stop_there(executor: CodeExecutor) -> None:
    async with executor.stream(f"{BOOK}print(book(flight='LH5'))") as run:
        stop = await run.next_stop()
    assert isinstance(stop, ExecutionResult) and "LH5: decline" in stop.text
    async with executor.stream(f"{BOOK}print(book(flight='LH6'))") as run:
        question = await run.next_stop(questions=True)
        assert isinstance(question, ElicitationRequest)
        await question.accept({"seats": 2})
        stop = await run.next_stop()
    assert isinstance(stop, ExecutionResult) and "LH6: 2 seat(s), aisle" in stop.text


async def test_execute_declines_and_tells_the_code_why(executor: CodeExecutor) -> None:
    result = await executor.execute(f"{BOOK}print(book(flight='LH7'))", approve_all=True)
    assert "LH7: decline" in result.text
    assert "execute() has no one to ask" in result.text


async def test_an_open_question_is_declined_when_its_execution_is_cancelled(executor: CodeExecutor) -> None:
    # The call runs in a thread, so interrupting the code does not cancel it: what the server gets
    # for the open question shows in its answer.
    code = (
        f"import threading\n{BOOK}box = {{}}\n"
        "worker = threading.Thread(target=lambda: box.update(answer=book(flight='LH8')))\n"
        "worker.start()\nworker.join()\n"
    )
    run = executor.stream(code)
    question = await until_question(run, [])
    await asyncio.wait_for(run.cancel(), 30)  # a guard against a hang, not a timing assertion
    assert question.answer is not None and question.answer.action == "decline"
    with pytest.raises(ExecutionCancelled):
        await result_of(run)
    result = await executor.execute("worker.join()\nprint(box['answer'])")
    assert result.error is None, result.error
    assert "LH8: decline" in result.text
    seen = await executor.execute(
        "from mcptools.elicit import answers_seen\nprint(answers_seen(count=1))", approve_all=True
    )
    assert "LH8: decline" in seen.text


async def test_a_question_nobody_answers_is_declined_after_abandon_after(executor: CodeExecutor) -> None:
    executor.abandon_after = 1
    try:
        async with executor.stream(f"{BOOK}print(book(flight='LH11'))") as run:
            question = await until_question(run, [])
            declined = asyncio.Event()
            question.add_done_callback(lambda _: declined.set())
            await asyncio.wait_for(declined.wait(), 30)  # nobody answers, nobody asks for more events
            result = await result_of(run)
    finally:
        del executor.abandon_after  # back to the class default
    assert question.answer is not None and question.answer.action == "decline"
    assert "LH11: decline" in result.text
    assert "nobody answered within 1 s (the executor's abandon_after)" in result.text


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def strict_executor(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[CodeExecutor]:
    async with CodeExecutor(
        workspace=tmp_path_factory.mktemp("ws"),
        approval="never",
        mcp_servers={"elicit": SERVER},
        timeout=4,
        call_timeout=1,
    ) as ex:
        yield ex


async def test_answer_time_counts_against_neither_call_timeout_nor_timeout(
    strict_executor: CodeExecutor,
) -> None:
    async with strict_executor.stream(f"{BOOK}print(book(flight='LH9'))") as run:
        question = await until_question(run, [])
        await asyncio.sleep(5)  # the user thinks: longer than call_timeout (1 s) and timeout (4 s)
        await question.accept({"seats": 4})
        result = await result_of(run)
    assert result.error is None, result.error
    assert "LH9: 4 seat(s), aisle" in result.text
    # The control: a call that takes longer without asking anything still times out.
    slow = await strict_executor.execute(
        "from mcptools.elicit import nap\ntry:\n    nap(seconds=3)\nexcept Exception as e:\n    print('failed:', e)"
    )
    assert "failed:" in slow.text and "did not answer within 1 s" in slow.text


class SlowUser:
    """An ``mcp_elicit`` callback that takes its time."""

    def __init__(self) -> None:
        self.questions: list[ElicitationRequest] = []

    async def __call__(self, request: ElicitationRequest) -> ElicitationAnswer:
        self.questions.append(request)
        await asyncio.sleep(2)  # longer than call_timeout
        return ElicitationAnswer.accept({"seats": 5, "window": True})


async def test_a_callback_answer_time_does_not_count_against_call_timeout(tmp_path: Path) -> None:
    user = SlowUser()
    async with CodeExecutor(
        workspace=tmp_path, approval="never", mcp_servers={"elicit": SERVER}, call_timeout=1, mcp_elicit=user
    ) as ex:
        result = await ex.execute(f"{BOOK}print(book(flight='LH10'))")
        assert result.error is None, result.error
        assert "LH10: 5 seat(s), window" in result.text
        assert [question.tool for question in user.questions] == ["book"]
        with pytest.raises(ElicitationError, match="elicit callback's return value"):
            await user.questions[0].decline()


async def test_example_answers_a_question_from_the_events() -> None:
    from example_runner import documented, run_example

    done = await asyncio.to_thread(run_example, "elicitation_events.py")
    lines = done.stdout.strip().splitlines()
    assert lines == [
        "placing the order",
        "checkout.checkout asks: Order b-101? (defaults: {'quantity': 1, 'shipping': 'standard'})",
        "ordered 3 x b-101, standard shipping",
        "ok",
    ]
    documented("api_generation.md", *lines)
