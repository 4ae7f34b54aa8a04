"""Every entry of ``execute_code`` finds its execution in its executor: the adapter keeps no store.

A web app builds its agent, middleware and ``RemoteSessions`` per request, on one checkpointer; the
kernel and the waiting MCP call live in a real ``ipybox serve``. Each request's new middleware picks
the execution up by the tool call id (``executor.reattach``), whichever way the client answers
(plain or keyed by interrupt id), and the code runs once.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
import pytest_asyncio
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command
from lc_kit import (
    APPROVE,
    action,
    config,
    make_agent,
    only_interrupt,
    run_code_then_finish,
    text_of,
    tool_messages,
    user,
)

from ipybox_core.remote import RemoteSessions
from ipybox_integrations.langchain import CodeActionMiddleware
from service.service_kit import TOKEN, Service, start_service

pytestmark = pytest.mark.asyncio(loop_scope="module")

TWO_CALLS = "from mcptools.test import add\nprint(add(a=1, b=0), add(a=2, b=0))"


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    started = start_service(tmp_path_factory.mktemp("lc-reattach") / "ws")
    yield started
    assert started.stop() == 0


@pytest_asyncio.fixture(loop_scope="module")
async def checkpointer() -> AsyncIterator[InMemorySaver]:
    yield InMemorySaver()


async def per_request(
    service: Service, checkpointer: InMemorySaver, thread: str, payload: Any, mode: Any = "batched"
) -> Any:
    """One request: a new RemoteSessions, middleware and agent on the shared checkpointer."""
    async with RemoteSessions(service.url, token=TOKEN) as sessions:
        middleware = CodeActionMiddleware(sessions, interrupt_mode=mode)
        _, agent = make_agent([middleware], run_code_then_finish(TWO_CALLS), checkpointer=checkpointer)
        return await agent.ainvoke(payload, config(thread), version="v2")


@pytest.mark.parametrize("keyed", [False, True], ids=["plain", "keyed-by-interrupt-id"])
async def test_a_new_middleware_per_request_resumes_the_execution_waiting_in_the_service(
    service: Service, checkpointer: InMemorySaver, keyed: bool
) -> None:
    thread = f"per-request-{keyed}"
    first = only_interrupt(await per_request(service, checkpointer, thread, user()))
    assert action(first)["args"] == {"a": 1, "b": 0}
    second = only_interrupt(await per_request(service, checkpointer, thread, Command(resume=APPROVE)))
    assert action(second)["args"] == {"a": 2, "b": 0}
    answer = {second.id: APPROVE} if keyed else APPROVE
    out = await per_request(service, checkpointer, thread, Command(resume=answer))
    assert not out.interrupts  # was: the keyed answer was taken for a question not yet asked
    assert [text_of(message) for message in tool_messages(out.value)] == ["1 2"]


async def test_per_call_questions_are_resumed_by_interrupt_id_from_a_new_middleware(
    service: Service, checkpointer: InMemorySaver
) -> None:
    thread, approve = "per-request-per-call", {"type": "approve"}
    first = only_interrupt(await per_request(service, checkpointer, thread, user(), "per_call"))
    assert (first.value["type"], first.value["args"]) == ("tool_approval", {"a": 1, "b": 0})
    second = only_interrupt(
        await per_request(service, checkpointer, thread, Command(resume={first.id: approve}), "per_call")
    )
    assert second.value["args"] == {"a": 2, "b": 0}
    out = await per_request(service, checkpointer, thread, Command(resume={second.id: approve}), "per_call")
    assert not out.interrupts
    assert [text_of(message) for message in tool_messages(out.value)] == ["1 2"]
