"""What a real MCP server asks of ipybox during a tool call (elicitation, sampling, roots) and tells it
(log and progress notifications), over stdio and Streamable HTTP, called from kernel code."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from mcp.types import CreateMessageResult, TextContent

from ipybox_core import CodeExecutor, ToolError
from ipybox_core.mcp import McpRegistry
from ipybox_core.mcp._upstream import MAX_NOTICES
from ipybox_core.mcp.elicitation import ElicitationAnswer, ElicitationRequest
from ipybox_core.mcp.sampling import SamplingRequest
from servers import PYTHON, SERVE_SCRIPT

pytest_plugins = ["servers.fixtures"]
pytestmark = pytest.mark.asyncio(loop_scope="module")

SERVERS = ["stdio", "http"]
STDIO = {"command": PYTHON, "args": [str(SERVE_SCRIPT), "stdio"], "env": {"PYTHONUNBUFFERED": "1"}}


class Application:
    """The application's side: answers each question with the answer the running test chose."""

    def __init__(self) -> None:
        self.answer: ElicitationAnswer | None = None
        self.questions: list[ElicitationRequest] = []
        self.samples: list[SamplingRequest] = []

    async def elicit(self, request: ElicitationRequest) -> ElicitationAnswer:
        self.questions.append(request)
        assert self.answer is not None
        return self.answer

    async def sample(self, request: SamplingRequest) -> CreateMessageResult:
        self.samples.append(request)
        text = request.params.messages[0].content
        assert isinstance(text, TextContent)
        return CreateMessageResult(
            role="assistant", content=TextContent(type="text", text=text.text[:5]), model="app-llm"
        )


@pytest.fixture(scope="module")
def app() -> Application:
    return Application()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def executor(
    app: Application, http_server_url: str, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[CodeExecutor]:
    async with CodeExecutor(
        workspace=tmp_path_factory.mktemp("ws"),
        approval="never",
        mcp_elicit=app.elicit,
        mcp_sample=app.sample,
        mcp_servers={"stdio": STDIO, "http": {"url": http_server_url}},
        timeout=60,
    ) as ex:
        yield ex


async def run(executor: CodeExecutor, code: str) -> str:
    result = await executor.execute(code)
    assert result.error is None, result.error
    return result.text


@pytest.mark.parametrize("server", SERVERS)
async def test_accepted_answer_gets_the_schema_defaults(
    executor: CodeExecutor, app: Application, server: str
) -> None:
    app.answer, app.questions[:] = ElicitationAnswer.accept({"quantity": 3}), []
    text = await run(
        executor, f"from mcptools.{server} import confirm_order\nprint(confirm_order(item='tea'))"
    )
    assert "ordered 3 x tea (no gift, standard)" in text
    (question,) = app.questions
    assert (question.server, question.tool) == (server, "confirm_order")
    assert question.message == "How many tea should I order?"
    assert question.defaults == {"quantity": 1, "gift": False, "shipping": "standard"}
    assert question.schema["properties"]["quantity"]["maximum"] == 10


@pytest.mark.parametrize("server", SERVERS)
async def test_declined_question_reaches_the_tool(
    executor: CodeExecutor, app: Application, server: str
) -> None:
    app.answer = ElicitationAnswer.decline()
    text = await run(
        executor, f"from mcptools.{server} import confirm_order\nprint(confirm_order(item='tea'))"
    )
    assert "order declined" in text


@pytest.mark.parametrize("server", SERVERS)
async def test_content_that_breaks_the_schema_is_refused_clearly(
    executor: CodeExecutor, app: Application, server: str
) -> None:
    app.answer = ElicitationAnswer.accept({"quantity": 99})
    code = (
        f"from mcptools.{server} import confirm_order\n"
        "from ipybox_core.runtime import ToolError\n"
        "try:\n    confirm_order(item='tea')\nexcept ToolError as e:\n    print('refused:', e)\n"
    )
    text = await run(executor, code)
    assert (
        f"refused: MCP server {server!r}: tool 'confirm_order' failed with JSON-RPC error -32602: ipybox: the "
        "application's answer does not match the requested schema: quantity: 99 is greater than the maximum of 10"
    ) in text


@pytest.mark.parametrize("server", SERVERS)
async def test_url_mode_question_asks_the_application_to_open_a_page(
    executor: CodeExecutor, app: Application, server: str
) -> None:
    app.answer, app.questions[:] = ElicitationAnswer.accept(), []
    text = await run(executor, f"from mcptools.{server} import link_account\nprint(link_account())")
    assert "link accept" in text
    (question,) = app.questions
    assert (question.tool, question.message, question.url) == (
        "link_account",
        "Link your account",
        "https://accounts.example/link?id=7",
    )
    assert question.schema == {} and question.defaults == {}


@pytest.mark.parametrize("server", SERVERS)
async def test_sampling_goes_to_the_application(
    executor: CodeExecutor, app: Application, server: str
) -> None:
    app.samples[:] = []
    text = await run(executor, f"from mcptools.{server} import summarize\nprint(summarize(text='abcdefgh'))")
    assert "app-llm: abcde" in text
    assert [(s.server, s.tool, s.params.max_tokens) for s in app.samples] == [(server, "summarize", 50)]


@pytest.mark.parametrize("server", SERVERS)
async def test_roots_are_the_workspace(executor: CodeExecutor, server: str) -> None:
    text = await run(executor, f"from mcptools.{server} import client_roots\nprint(client_roots())")
    assert executor.workspace.as_uri() in text


@pytest.mark.parametrize("server", SERVERS)
async def test_log_and_progress_reach_stderr_bounded(executor: CodeExecutor, server: str) -> None:
    text = await run(executor, f"from mcptools.{server} import chatty\nprint(chatty(lines=2))")
    assert f"[mcp:{server}] info: step 1 of 2" in text
    assert f"[mcp:{server}] progress 2/2: step 2" in text
    text = await run(executor, f"from mcptools.{server} import chatty\nprint(chatty(lines=50))")
    assert text.count(f"[mcp:{server}] ") == MAX_NOTICES + 1
    assert f"[mcp:{server}] ... {100 - MAX_NOTICES} more log/progress messages left out" in text


async def test_without_handlers_questions_are_declined_and_sampling_refused(http_server_url: str) -> None:
    async with McpRegistry(connect_timeout=60, call_timeout=30) as registry:
        await registry.add("shop", {"url": http_server_url})
        result = await registry.call("shop", "confirm_order", {"item": "tea"})
        assert result.text == "order declined"
        (notice,) = result.notices
        assert "[mcp:shop] the server asked a question during 'confirm_order'" in notice
        assert (
            "no elicitation handler is configured (McpRegistry(elicit=...), CodeExecutor(mcp_elicit=...))"
            in notice
        )
        chatty = await registry.call(
            "shop", "confirm_order", {"item": "tea", "chatter": 30, "note": "!" * 1000}
        )
        assert chatty.text == "order declined"
        assert len(chatty.notices) == MAX_NOTICES + 2  # the declined question is never left out
        assert chatty.notices[-2].endswith(
            "declined: no elicitation handler is configured (McpRegistry(elicit=...), CodeExecutor(mcp_elicit=...))"
        )
        with pytest.raises(
            ToolError, match=r"sampling is not configured .*CodeExecutor\(mcp_sample=\.\.\.\)"
        ):
            await registry.call("shop", "summarize", {"text": "x"})
        roots = await registry.call("shop", "client_roots")
        assert roots.structured == {"result": []}


async def test_messages_of_a_failing_call_are_in_its_error_not_the_next_result(http_server_url: str) -> None:
    async with McpRegistry(connect_timeout=60, call_timeout=30) as registry:
        await registry.add("shop", {"url": http_server_url})
        with pytest.raises(ToolError) as failed:
            await registry.call("shop", "chatty", {"lines": 1, "fail": True})
        assert str(failed.value).splitlines()[1:] == [
            "[mcp:shop] info: step 1 of 1",
            "[mcp:shop] progress 1/1: step 1",
        ]
        assert "chatty failed after its messages" in str(failed.value)
        assert (await registry.call("shop", "chatty", {"lines": 0})).notices == ()


async def test_configured_roots(tmp_path: Path) -> None:
    async with McpRegistry(connect_timeout=60, roots=[tmp_path, "file:///srv/data"]) as registry:
        await registry.add("shop", STDIO)
        roots: Any = (await registry.call("shop", "client_roots")).structured
        assert roots == {"result": [tmp_path.resolve().as_uri(), "file:///srv/data"]}


async def test_example_answers_a_question_and_a_sampling_request() -> None:
    from example_runner import documented, run_example

    done = await asyncio.to_thread(run_example, "upstream_requests.py")
    lines = done.stdout.strip().splitlines()
    assert lines == [
        "checkout.checkout asks: Order b-101? (defaults: {'quantity': 1, 'shipping': 'standard'})",
        "ordered 2 x b-101, standard shipping",
        "b-101: a fine choice.",
        "ipybox: [mcp:checkout] info: checking stock of b-101",
        "ipybox: [mcp:checkout] progress 1/1: order placed",
    ]
    documented("api_generation.md", *lines)
