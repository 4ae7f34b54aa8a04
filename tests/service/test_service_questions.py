"""MCP servers' questions (elicitation) over ``ipybox serve``: a question an upstream server asks
during a call of the code is an ``ElicitationRequest`` event of the ``RemoteExecutor``'s
execution, answered there as in process (an ``ipybox.dev/question`` round, issue 27). A worker
that dies holding it leaves it declined after the bound (the approval timeout and the grace), the
code going on; another worker that picks the call up is asked it again. A client that does not
say it takes questions gets today's decline. The real ``tests/servers/elicit_server.py`` asks and
says what it got; the service approves every call itself (``--yes``)."""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from service_kit import TOKEN, Service, start_app, start_service, wait_for_line

from ipybox_core.executor import ExecutionResult
from ipybox_core.mcp.elicitation import ElicitationRequest
from ipybox_core.mcp_server._host_calls import GRACE
from ipybox_core.protocol import service_key
from ipybox_core.remote import RemoteExecutor, RemoteSessions
from ipybox_core.remote._connection import ServiceConnection
from servers import PYTHON, SERVERS_DIR

APPROVAL_TIMEOUT = 5.0
ELICIT = {
    "command": PYTHON,
    "args": [str(SERVERS_DIR / "elicit_server.py")],
    "env": {"PYTHONUNBUFFERED": "1"},
}


def elicit_service(tmp_path_factory: pytest.TempPathFactory) -> Service:
    """An ``ipybox serve --yes`` with the ``elicit`` server, whose questions wait
    :data:`APPROVAL_TIMEOUT` seconds (and the grace) for a worker that took one."""
    workspace = tmp_path_factory.mktemp("service") / "ws"
    timeout = str(APPROVAL_TIMEOUT)
    return start_service(workspace, "--yes", "--approval-timeout", timeout, servers={"elicit": ELICIT})


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    shared = elicit_service(tmp_path_factory)
    yield shared
    assert shared.stop() == 0


def book(flight: str) -> str:
    return f"from mcptools.elicit import book\nprint(book(flight={flight!r}))"


async def executor_of(sessions: RemoteSessions, conversation: str) -> RemoteExecutor:
    executor = (await sessions.session(conversation)).executor
    assert isinstance(executor, RemoteExecutor)
    return executor


def test_an_accepted_answer_reaches_the_servers_tool_and_its_result_the_code(
    service: Service, conversation: str
) -> None:
    async def main() -> tuple[ElicitationRequest, str]:
        asked: ElicitationRequest | None = None
        async with RemoteSessions(service.url, token=TOKEN, client_name="asker") as sessions:
            executor = await executor_of(sessions, conversation)
            async with executor.stream(book("LH1")) as execution:
                async for event in execution:
                    if isinstance(event, ElicitationRequest):
                        asked = event
                        assert asked.pending and execution.pending_questions == [asked]
                        await asked.accept({"seats": 3, "window": True})
                    elif isinstance(event, ExecutionResult):
                        assert asked is not None, f"the code was never asked: {event.text}"
                        return asked, event.text
        raise AssertionError("no result")

    asked, text = asyncio.run(main())
    assert (asked.server, asked.tool, asked.message, asked.url) == (
        "elicit",
        "book",
        "How many seats on LH1?",
        None,
    )
    assert asked.defaults == {"seats": 1, "window": False}  # the server's form, as in process
    assert text.strip() == "LH1: 3 seat(s), window"


def test_a_declined_question_is_declined_at_the_server(service: Service, conversation: str) -> None:
    async def main() -> tuple[ElicitationRequest, str]:
        async with RemoteSessions(service.url, token=TOKEN, client_name="asker") as sessions:
            executor = await executor_of(sessions, conversation)
            async with executor.stream(book("LH2")) as execution:
                stop = await execution.next_stop(questions=True)  # a stop, as in process
                assert isinstance(stop, ElicitationRequest)
                await stop.decline()
                result = await execution.next_stop()
                assert isinstance(result, ExecutionResult)
                return stop, result.text

    asked, text = asyncio.run(main())
    assert asked.message == "How many seats on LH2?"
    assert text.strip() == "LH2: decline"


def hung_question(service: Service, flight: str, marker: Path) -> None:
    """Worker A starts code that books ``flight`` (call id ``asked``), takes the server's
    question and is SIGKILLed holding it."""
    worker = start_app("question_app.py", "hang", service.url, flight, str(marker))
    assert wait_for_line(worker, "ASKED") == f"ASKED How many seats on {flight}?"
    worker.send_signal(signal.SIGKILL)
    worker.wait()


def written(marker: Path, timeout: float = 120.0) -> str:
    """What the code wrote to ``marker`` once the server's call returned."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if marker.exists() and (text := marker.read_text()):
            return text
        time.sleep(0.2)
    raise AssertionError(f"the code never wrote {marker}")


async def picked_up(service: Service, conversation: str, seats: int | None) -> tuple[list[str], str]:
    """Worker B reattaches to call ``asked``: the questions it is asked (accepted with ``seats``)
    and the code's output (its result's text)."""
    asked: list[str] = []
    async with RemoteSessions(service.url, token=TOKEN, client_name="question-b") as sessions:
        executor = await executor_of(sessions, conversation)
        again = await executor.reattach("asked")
        assert again is not None
        async for event in again:
            if isinstance(event, ElicitationRequest):
                asked.append(event.message)
                await event.accept({"seats": seats})
            elif isinstance(event, ExecutionResult):
                return asked, event.text
    raise AssertionError("no result")


def test_a_question_a_dead_worker_held_is_declined_after_the_bound_and_the_code_goes_on(
    service: Service, conversation: str, tmp_path: Path
) -> None:
    marker = tmp_path / "booked.txt"
    hung_question(service, "LH3", marker)
    assert written(marker) == "LH3: decline"  # nobody answered: declined, the server's call returned
    asked, text = asyncio.run(picked_up(service, conversation, seats=2))
    assert asked == []  # nothing left to ask: the execution went on without it
    assert "LH3: decline" in text
    bound = f"nobody answered within {APPROVAL_TIMEOUT + GRACE:g} s"
    assert bound in text and "(question-a)" in text, text  # the code was told why


def test_a_worker_that_picks_the_call_up_is_asked_the_question_again(
    service: Service, conversation: str, tmp_path: Path
) -> None:
    marker = tmp_path / "booked.txt"
    hung_question(service, "LH4", marker)
    asked, text = asyncio.run(picked_up(service, conversation, seats=2))
    assert asked == ["How many seats on LH4?"]
    assert text.strip() == "LH4: 2 seat(s), aisle" == marker.read_text()


def test_a_client_that_does_not_take_questions_gets_them_declined(
    service: Service, conversation: str
) -> None:
    """The control: a round without ``ipybox.dev/questions`` (a plain MCP client) is never asked."""

    async def main() -> str:
        connection = ServiceConnection(service.url, token=TOKEN, client_name="plain")
        await connection.open()
        try:
            reply = await connection.execute(service_key(conversation), arguments={"code": book("LH5")})
        finally:
            await connection.aclose()
        return "\n".join(getattr(block, "text", "") for block in reply.content)  # type: ignore[union-attr]

    text = asyncio.run(main())
    assert "LH5: decline" in text
