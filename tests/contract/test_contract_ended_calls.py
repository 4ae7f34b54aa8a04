"""A late answer to a call that no longer waits names why, on every backend (issue 23).

An approval deferred by one request of a web app (PydanticAI's ``DeferredToolRequests``) is answered
by the next one with a new agent, after the call stopped waiting: its approval expired (the
application's timer), the application cancelled it, another client answered it first, or (over
``ipybox serve``) the service restarted. The model is told that cause, not the list of every
possible one (``NOT_WAITING_MESSAGE``). Real kernels, real MCP server, real service processes; the
model is scripted.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent, AgentRunResult, DeferredToolRequests

from contract.test_executor_contract import Backend, backend, conversation, count_code, service
from integrations.pydantic_ai.pai_kit import ScriptedModel, returns_of, text_of
from ipybox_core import ApprovalRequest, protocol
from ipybox_core.executor import SessionSource
from ipybox_core.remote import RemoteSessions
from ipybox_integrations.pydantic_ai import CodeAction, approval_results
from service.service_kit import start_service

__all__ = ["backend", "service"]  # the contract suite's backends (and the service behind one)

in_module_loop = pytest.mark.asyncio(loop_scope="module")


def per_request_agent(source: SessionSource, key: str, **options: Any) -> Agent[None, object]:
    """What a web app builds for each request: a new capability and agent."""
    capability = CodeAction(source, key=lambda ctx: key, **options)
    return Agent(
        ScriptedModel([count_code(key)]).model,
        capabilities=[capability],
        output_type=[str, DeferredToolRequests],
    )


async def deferred(source: SessionSource, key: str, **options: Any) -> tuple[AgentRunResult[object], str]:
    """The first request: its run stops at the approval; the call id it waits under."""
    first = await per_request_agent(source, key, **options).run("go")
    assert isinstance(first.output, DeferredToolRequests)
    return first, first.output.approvals[0].tool_call_id


async def answered_late(source: SessionSource, key: str, first: AgentRunResult[object]) -> str:
    """The next request brings the approval: what the model reads for the call."""
    assert isinstance(first.output, DeferredToolRequests)
    answers = approval_results(first.output, lambda approval: True)
    done = await per_request_agent(source, key).run(
        message_history=first.all_messages(), deferred_tool_results=answers
    )
    (returned,) = returns_of(done)
    return text_of(returned)


async def timer_fired(backend: Backend, key: str) -> asyncio.Event:
    """Set once the application's timer cancelled what waits in ``key``: when a ``cancel_waiting``
    of its executor cancelled something (an executor's conversations share the executor's)."""
    fired = asyncio.Event()
    executor: Any = backend.source if backend.name == "executor" else await backend.executor(key)
    cancel_waiting = executor.cancel_waiting  # (Sessions and RemoteSessions keep one per key)

    async def observed(**options: Any) -> int:
        cancelled = int(await cancel_waiting(**options))
        if cancelled:  # (a run also cancels what its conversation left, usually nothing)
            fired.set()
        return cancelled

    executor.cancel_waiting = observed
    return fired


@in_module_loop
async def test_an_approval_expired_by_the_applications_timer_is_told_so(backend: Backend) -> None:
    key = conversation()
    fired = await timer_fired(backend, key)
    first, _ = await deferred(backend.source, key, abandon_after=0.3)
    await asyncio.wait_for(fired.wait(), 60)
    told = await answered_late(backend.source, key, first)
    assert told != protocol.NOT_WAITING_MESSAGE  # was: every possible cause
    assert "no longer waits for an approval: it was cancelled (abandoned: nobody decided this call " in told
    assert "within 0.3 s (the adapter's abandon_after))" in told


@in_module_loop
async def test_a_call_the_application_cancelled_is_told_so_with_its_reason(backend: Backend) -> None:
    key = conversation()
    first, call_id = await deferred(backend.source, key)
    executor = await backend.executor(key)
    assert await executor.cancel_waiting(calls=[call_id], reason="the user closed the chat") == 1
    told = await answered_late(backend.source, key, first)
    assert "no longer waits for an approval: it was cancelled (the user closed the chat)" in told
    assert "did not run" in told


@in_module_loop
async def test_a_call_another_client_answered_first_names_that_client(backend: Backend) -> None:
    key = conversation()
    first, call_id = await deferred(backend.source, key)
    async with backend.another() as other:  # another worker (in process: another adapter) answers
        execution = await (await other.session(key)).executor.reattach(call_id)
        assert execution is not None
        request = await execution.next_stop()
        assert isinstance(request, ApprovalRequest)
        await request.accept(decided_by="client:contract-other")  # the service names its client so
        assert (await execution.wait()).text.strip() == "count 1"
    told = await answered_late(backend.source, key, first)
    assert (
        told
        == "Error: this approval was already answered (by client:contract-other); this answer was not applied."
    )


@in_module_loop
async def test_a_graceful_service_restart_is_told_as_a_restart(tmp_path: Path) -> None:
    running = start_service(tmp_path / "ws")
    try:
        async with RemoteSessions(running.url, token=running.token, client_name="before") as sessions:
            first, call_id = await deferred(sessions, "restart")
    finally:
        assert running.stop() == 0  # SIGTERM: the service stops gracefully
    restarted = start_service(tmp_path / "ws")
    try:
        async with RemoteSessions(restarted.url, token=restarted.token, client_name="after") as sessions:
            told = await answered_late(sessions, "restart", first)
            assert told == protocol.SERVICE_RESTARTED_MESSAGE  # was: every possible cause
            executor = (await sessions.session("restart")).executor
            assert (await executor.ended(call_id)) is not None  # what the reattach learned
            assert (await executor.ended("never-started")) is None
            after = await executor.stream("print('after')").wait()  # the next turn: the restart notice
            assert after.text.startswith(
                "Note: the Python kernel of this conversation was restarted (the ipybox service restarted)"
            )
            assert after.text.endswith("after\n")
    finally:
        assert restarted.stop() == 0
