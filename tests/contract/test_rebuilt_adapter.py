"""A web app that builds its agent per request: the execution waiting for a deferred approval
belongs to its executor, so the next request's new ``CodeAction`` resumes it (real kernel, real
MCP server; the model is scripted)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from pydantic_ai import Agent, DeferredToolRequests

from integrations.pydantic_ai.pai_kit import THREE_CALLS, ScriptedModel, returns_of, roundtrip, text_of
from ipybox_core import CodeExecutor, Sessions
from ipybox_integrations.pydantic_ai import CodeAction, approval_results
from ipybox_integrations.pydantic_ai._execute import STALE_APPROVAL_MESSAGE
from servers import PYTHON, SERVE_SCRIPT
from servers.executors import executor_with_test_server

in_module_loop = pytest.mark.asyncio(loop_scope="module")
TEST_SERVER = {"command": PYTHON, "args": [str(SERVE_SCRIPT), "stdio"]}


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def executor(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[CodeExecutor]:
    async with executor_with_test_server(tmp_path_factory.mktemp("rebuilt")) as ex:
        yield ex


def per_request_agent(source: CodeExecutor | Sessions, model: ScriptedModel) -> Agent[None, object]:
    """What a FastAPI handler does: a new capability and agent for every request."""
    return Agent(model.model, capabilities=[CodeAction(source)], output_type=[str, DeferredToolRequests])


async def answer_each_request_with_a_new_agent(
    source: CodeExecutor | Sessions, conversation: str
) -> tuple[str, int]:
    model = ScriptedModel([THREE_CALLS])
    result = await per_request_agent(source, model).run("go", conversation_id=conversation)
    rounds = 0
    while isinstance(result.output, DeferredToolRequests):
        rounds += 1
        answers = approval_results(result.output, lambda approval: True)
        result = await per_request_agent(source, model).run(
            message_history=roundtrip(result.all_messages()),
            deferred_tool_results=answers,
            conversation_id=conversation,
        )
    (returned,) = returns_of(result)
    return text_of(returned), rounds


@in_module_loop
async def test_a_new_code_action_per_request_resumes_the_waiting_execution(executor: CodeExecutor) -> None:
    output, rounds = await answer_each_request_with_a_new_agent(executor, "web-1")
    assert output != STALE_APPROVAL_MESSAGE  # was: stale, and the executor stayed busy
    assert output == "13 hello" and rounds == 3
    assert not executor.busy


@in_module_loop
async def test_a_new_code_action_per_request_resumes_it_in_sessions(tmp_path: Path) -> None:
    async with Sessions(mcp_servers={"test": TEST_SERVER}, root=tmp_path / "sessions") as sessions:
        output, rounds = await answer_each_request_with_a_new_agent(sessions, "web-2")
        assert (output, rounds) == ("13 hello", 3)
        assert not (await sessions.session("web-2")).executor.busy
