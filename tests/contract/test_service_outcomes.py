"""What ends an execution in ``ipybox serve`` reaches the client and the adapters as the same
exception a local executor raises, and the model is told its cause (real service process)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest
import pytest_asyncio
from pydantic_ai import Agent, DeferredToolRequests

from integrations.pydantic_ai.pai_kit import ScriptedModel, returns_of, text_of
from ipybox_core import CodeExecutor, protocol
from ipybox_core.errors import ExecutionTimeout, KernelDied
from ipybox_core.remote import RemoteSessions
from ipybox_integrations.pydantic_ai import CodeAction, approval_results
from service.service_kit import Service, start_service

in_module_loop = pytest.mark.asyncio(loop_scope="module")
COUNT = "from mcptools.test import count\nprint('count', count())"
_TIMEOUT_TEXT = "the code ran longer than its 1 s timeout and was interrupted; the kernel's state is kept"


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    running = start_service(tmp_path_factory.mktemp("outcomes") / "ws")
    yield running
    assert running.stop() == 0


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def sessions(service: Service) -> AsyncIterator[RemoteSessions]:
    async with RemoteSessions(service.url, token=service.token, client_name="outcomes") as remote:
        yield remote


@in_module_loop
async def test_a_timeout_in_the_service_is_an_execution_timeout_and_the_state_is_kept(
    sessions: RemoteSessions,
) -> None:
    executor = (await sessions.session("timeout")).executor
    await executor.stream("kept = 'yes'").wait()
    with pytest.raises(ExecutionTimeout) as raised:  # was: TypeError from the client's error table
        await executor.stream("import time; time.sleep(30)", timeout=1).wait()
    assert raised.value.timeout == 1.0
    assert str(raised.value) == _TIMEOUT_TEXT
    assert (await executor.stream("print(kept)").wait()).text.strip() == "yes"


@in_module_loop
async def test_a_kernel_death_in_the_service_is_kernel_died_and_the_next_kernel_is_fresh(
    sessions: RemoteSessions,
) -> None:
    executor = (await sessions.session("death")).executor
    await executor.stream("before = 1").wait()
    with pytest.raises(KernelDied) as raised:
        await executor.stream("import os; os._exit(3)").wait()
    assert raised.value.exit_code == 3
    after = await executor.stream("print('before' in dir())").wait()
    assert after.text.strip() == "False"


@in_module_loop
async def test_pydantic_ai_over_the_service_tells_the_model_of_a_timeout_and_a_kernel_death(
    sessions: RemoteSessions,
) -> None:
    model = ScriptedModel(["import time; time.sleep(30)", "import os; os._exit(3)"])
    agent = Agent(model.model, capabilities=[CodeAction(sessions, key=lambda ctx: "pai-outcomes", timeout=1)])
    result = await agent.run("go")  # was: the run ended with TypeError
    timed_out, died = (text_of(part) for part in returns_of(result))
    assert timed_out == protocol.failure_text(ExecutionTimeout(_TIMEOUT_TEXT, timeout=1))
    assert died.startswith("Error: the kernel died") and "exit code 3" in died


def deferring_agent(sessions: RemoteSessions, conversation: str, **options: float) -> Agent[None, object]:
    return Agent(
        ScriptedModel([COUNT]).model,
        capabilities=[CodeAction(sessions, key=lambda ctx: conversation, **options)],
        output_type=[str, DeferredToolRequests],
    )


async def waits_in_the_service(service: Service, conversation: str, call_id: str) -> bool:
    """Asked by a process of its own (a fresh client knows nothing of this one's executions)."""
    async with RemoteSessions(service.url, token=service.token, client_name="checker") as checker:
        execution = await (await checker.session(conversation)).executor.reattach(call_id)
        return execution is not None


@in_module_loop
async def test_an_approval_asked_through_remote_sessions_outlives_every_worker_timer(
    service: Service, sessions: RemoteSessions, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every worker-side default timer is short: the in-process backstop and (before the fix) the
    # adapter's own abandon_after. The service's --approval-timeout (a day) governs this call.
    monkeypatch.setattr(CodeExecutor, "abandon_after", 0.2, raising=False)
    defaults = CodeAction.__init__.__kwdefaults__
    if defaults["abandon_after"] is not None:
        monkeypatch.setitem(defaults, "abandon_after", 0.2)
    first = await deferring_agent(sessions, "outlives").run("go")
    assert isinstance(first.output, DeferredToolRequests)

    # Control: a timer the application asks for does cancel its call in the service.
    asked = await deferring_agent(sessions, "control", abandon_after=0.2).run("go")
    assert isinstance(asked.output, DeferredToolRequests)
    control_call = asked.output.approvals[0].tool_call_id
    for _ in range(600):
        if not await waits_in_the_service(service, "control", control_call):
            break
    else:
        raise AssertionError("the explicit abandon_after never cancelled the control call")

    # Longer than any worker timer has passed since the first call was parked: it still waits.
    call = first.output.approvals[0].tool_call_id
    assert await waits_in_the_service(service, "outlives", call)
    answers = approval_results(first.output, lambda approval: True)
    done = await deferring_agent(sessions, "outlives").run(
        message_history=first.all_messages(), deferred_tool_results=answers
    )
    (returned,) = returns_of(done)
    assert text_of(returned).startswith("count ")
