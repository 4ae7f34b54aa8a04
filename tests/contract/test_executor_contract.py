"""The executor contract, one scenario set on every backend an adapter can be given: a local
``CodeExecutor`` (one kernel for every conversation), ``Sessions`` (a kernel per conversation) and
``RemoteSessions`` against a real ``ipybox serve``. Adapters type against ``SessionSource`` and
``Executor`` only, so what holds here holds for each of them wherever the kernel runs.

"Another instance" is what a rebuilt adapter or another worker has: the same executor in process,
a second client of the service (its own connection, knowing nothing of the first one's executions).
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass

import pytest
import pytest_asyncio

from ipybox_core import ApprovalRequest, ExecutionResult, Sessions
from ipybox_core.errors import ApprovalError, ExecutionCancelled, ExecutionTimeout, ExecutorBusy, KernelDied
from ipybox_core.executor import Execution, Executor, SessionSource
from ipybox_core.remote import RemoteSessions
from servers.executors import executor_with_test_server
from service.service_kit import TEST_SERVER, Service, start_service

in_module_loop = pytest.mark.asyncio(loop_scope="module")
_keys = itertools.count()


@dataclass
class Backend:
    """A session source, and a way to reach the same conversations from another instance."""

    name: str
    source: SessionSource
    another: Callable[[], AbstractAsyncContextManager[SessionSource]]

    async def executor(self, key: str) -> Executor:
        return (await self.source.session(key)).executor


@contextlib.asynccontextmanager
async def _same(source: SessionSource) -> AsyncIterator[SessionSource]:
    yield source


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    running = start_service(tmp_path_factory.mktemp("contract") / "ws")
    yield running
    assert running.stop() == 0


@pytest_asyncio.fixture(loop_scope="module", scope="module", params=["executor", "sessions", "service"])
async def backend(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Backend]:
    if request.param == "executor":
        async with executor_with_test_server(tmp_path_factory.mktemp("local")) as executor:
            yield Backend("executor", executor, lambda: _same(executor))
    elif request.param == "sessions":
        root = tmp_path_factory.mktemp("sessions")
        async with Sessions(mcp_servers={"test": TEST_SERVER}, root=root, warm=1, timeout=60) as sessions:
            yield Backend("sessions", sessions, lambda: _same(sessions))
    else:
        service: Service = request.getfixturevalue("service")

        def client() -> RemoteSessions:
            return RemoteSessions(service.url, token=service.token, client_name="contract-other")

        async with RemoteSessions(service.url, token=service.token, client_name="contract") as remote:
            yield Backend("service", remote, client)


def conversation() -> str:
    return f"contract-{next(_keys)}"


def count_code(tag: str) -> str:
    return f"from mcptools.test import count\nprint('count', count(tag={tag!r}))"


async def asked(executor: Executor, code: str, call_id: str | None = None) -> ApprovalRequest:
    stop = await executor.stream(code, call_id=call_id).next_stop()
    assert isinstance(stop, ApprovalRequest), stop
    return stop


async def counted(executor: Executor, tag: str) -> int:
    """How often ``count(tag)`` ran so far (this call approved, and not counted)."""
    execution = executor.stream(count_code(tag))
    stop = await execution.next_stop()
    assert isinstance(stop, ApprovalRequest)
    await stop.accept()
    return int((await execution.wait()).text.split()[1]) - 1


@in_module_loop
async def test_an_approved_call_runs_exactly_once_and_its_result_reaches_the_code(backend: Backend) -> None:
    key = conversation()
    executor = await backend.executor(key)
    execution = executor.stream(count_code(key))
    request = await execution.next_stop()
    assert isinstance(request, ApprovalRequest)
    assert (request.server, request.tool, request.args) == ("test", "count", {"tag": key})
    await request.accept()
    assert (await execution.wait()).text.strip() == "count 1"
    assert await counted(executor, key) == 1
    assert not executor.busy


@in_module_loop
async def test_a_rejected_call_never_runs_and_the_code_gets_the_reason(backend: Backend) -> None:
    key = conversation()
    executor = await backend.executor(key)
    code = f"try:\n{_indented(count_code(key))}\nexcept PermissionError as e:\n    print('refused:', e)"
    execution = executor.stream(code)
    request = await execution.next_stop()
    assert isinstance(request, ApprovalRequest)
    await request.reject("not today")
    assert (await execution.wait()).text.strip() == "refused: test.count was rejected: not today"
    assert await counted(executor, key) == 0


@in_module_loop
async def test_an_edited_call_runs_with_the_edited_arguments(backend: Backend) -> None:
    executor = await backend.executor(conversation())
    execution = executor.stream("from mcptools.test import add\nprint('sum', add(a=1, b=2))")
    request = await execution.next_stop()
    assert isinstance(request, ApprovalRequest)
    await request.accept(arguments={"a": 40, "b": 2})
    assert (await execution.wait()).text.strip() == "sum 42"


@in_module_loop
async def test_a_timeout_is_execution_timeout_and_the_state_is_kept(backend: Backend) -> None:
    executor = await backend.executor(conversation())
    await executor.stream("kept = 'yes'").wait()
    with pytest.raises(ExecutionTimeout) as raised:
        await executor.stream("import time; time.sleep(30)", timeout=1).wait()
    assert raised.value.timeout == 1.0
    assert (await executor.stream("print(kept)").wait()).text.strip() == "yes"
    assert not executor.busy


@in_module_loop
async def test_a_kernel_death_is_kernel_died_and_the_next_execution_has_a_fresh_kernel(
    backend: Backend,
) -> None:
    executor = await backend.executor(conversation())
    await executor.stream("before = 1").wait()
    with pytest.raises(KernelDied) as raised:
        await executor.stream("import os; os._exit(3)").wait()
    assert raised.value.exit_code == 3
    assert (await executor.stream("print('before' in dir())").wait()).text.strip() == "False"
    execution = executor.stream("from mcptools.test import add\nprint(add(a=1, b=1))")
    request = await execution.next_stop()  # the MCP tools still work in the new kernel
    assert isinstance(request, ApprovalRequest)
    await request.accept()
    assert (await execution.wait()).text.strip() == "2"


@in_module_loop
async def test_a_waiting_execution_keeps_its_conversation_busy(backend: Backend) -> None:
    executor = await backend.executor(conversation())
    execution = executor.stream("from mcptools.test import add\nprint(add(a=1, b=1))", call_id="busy")
    request = await execution.next_stop()
    assert isinstance(request, ApprovalRequest)
    with pytest.raises(ExecutorBusy):  # from stream(), or over a service from its execution
        await executor.stream("print('meanwhile')").wait()
    await request.reject("done")
    assert (await execution.wait()).error is not None  # the code did not catch the PermissionError
    assert not executor.busy
    assert await executor.cancel_waiting() == 0


@in_module_loop
async def test_another_instance_finds_the_waiting_execution_by_its_call_id(backend: Backend) -> None:
    key = conversation()
    executor = await backend.executor(key)
    first = await asked(executor, count_code(key), call_id=f"{key}-call")
    async with backend.another() as other:
        theirs = (await other.session(key)).executor
        assert await theirs.reattach("no-such-call") is None
        execution = await theirs.reattach(f"{key}-call")
        assert execution is not None
        again = await execution.next_stop()
        assert isinstance(again, ApprovalRequest) and again.id == first.id
        await again.accept()
        result = await execution.next_stop()
        assert isinstance(result, ExecutionResult) and result.text.strip() == "count 1"
        assert await theirs.reattach(f"{key}-call") is None  # it ended: nothing waits any more
    assert await counted(executor, key) == 1


@in_module_loop
async def test_cancel_waiting_ends_the_waiting_execution_and_its_call_never_runs(backend: Backend) -> None:
    key = conversation()
    executor = await backend.executor(key)
    await asked(executor, count_code(key), call_id=f"{key}-left")
    assert await executor.cancel_waiting(keep=[f"{key}-left"]) == 0
    assert await executor.cancel_waiting(calls=["another-call"]) == 0
    assert await executor.cancel_waiting(calls=[f"{key}-left"], reason="the conversation moved on") == 1
    assert not executor.busy
    again = await executor.reattach(f"{key}-left")
    if again is not None:  # in process it is found once more, to tell why it ended
        with pytest.raises(ExecutionCancelled, match="the conversation moved on"):
            await again.wait()
    assert await counted(executor, key) == 0


@in_module_loop
async def test_a_second_answer_loses_and_is_told_who_answered_first(backend: Backend) -> None:
    key = conversation()
    executor = await backend.executor(key)
    mine = executor.stream(count_code(key), call_id=f"{key}-race")
    my_question = await mine.next_stop()
    assert isinstance(my_question, ApprovalRequest)
    async with backend.another() as other:
        theirs = await (await other.session(key)).executor.reattach(f"{key}-race")
        assert theirs is not None
        their_question = await theirs.next_stop()
        assert isinstance(their_question, ApprovalRequest) and their_question.id == my_question.id
        await my_question.accept(decided_by="client:contract")  # the service names its client so too
        assert (await mine.wait()).text.strip() == "count 1"
        with pytest.raises(ApprovalError) as late:  # at once in process, from its execution over a service
            await _reject_and_wait(their_question, theirs)
    assert "client:contract" in str(late.value) and "contract-other" not in str(late.value)
    assert await counted(executor, key) == 1


async def _reject_and_wait(question: ApprovalRequest, execution: Execution) -> None:
    await question.reject("too late", decided_by="client:contract-other")
    await execution.wait()


def _indented(code: str) -> str:
    return "\n".join(f"    {line}" for line in code.splitlines())
