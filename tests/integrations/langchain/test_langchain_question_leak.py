"""A question cancelled with its execution stays with that execution (issue 27): after new input
cancels an execution whose MCP call waits for the user's answer (LangChain's new-input path), the
"declined: the execution was cancelled" notice is not on the stderr of the conversation's next
execution.

The cause: a call's notices wait in its connection until the call returns; a call cancelled with
its execution (the kernel interrupted) left them there, and the next call on that connection took
them. A direct ``cancel()`` at the question races the server's reply to the decline (the call may
still return, taking its notices) against the interrupt; LangChain's move-on loses the race.

Real kernel, the real stdio elicit server (tests/servers/elicit_server.py), a real checkpointer;
only the chat model is scripted.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from langchain_core.messages import AIMessage, BaseMessage
from lc_kit import config, make_agent, only_interrupt, text_of, tool_call, tool_messages, user

from ipybox_core import CodeExecutor
from ipybox_core.mcp.elicitation import ElicitationRequest
from ipybox_integrations.langchain import CodeActionMiddleware
from servers.executors import ELICIT_SERVER, left_idle

pytestmark = pytest.mark.asyncio(loop_scope="package")

BOOK = "from mcptools.elicit import book, nap, answers_seen\n"


@pytest_asyncio.fixture(loop_scope="package", scope="module")
async def leak_executor(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[CodeExecutor]:
    """A kernel of its own with the elicit server, its calls unasked: the tests read what the
    server's connection carries into the next call."""
    workspace = tmp_path_factory.mktemp("lc-leak-ws")
    async with CodeExecutor(
        workspace=workspace, approval="never", mcp_servers={"elicit": ELICIT_SERVER}
    ) as ex:
        yield ex


@pytest_asyncio.fixture(loop_scope="package")
async def executor(leak_executor: CodeExecutor) -> AsyncIterator[CodeExecutor]:
    async with left_idle(leak_executor) as ex:
        yield ex


async def test_the_cancelled_questions_notice_is_not_in_the_next_execution(executor: CodeExecutor) -> None:
    def script(messages: list[BaseMessage]) -> AIMessage:
        last = messages[-1]
        if last.type == "human" and last.text == "book":
            return AIMessage(content="", tool_calls=[tool_call(f"{BOOK}print(book(flight='LX1'))", "call_b")])
        if last.type == "human":  # a second call on the server's connection
            return AIMessage(
                content="", tool_calls=[tool_call(f"{BOOK}print(answers_seen(count=0))", "call_s")]
            )
        return AIMessage(content="done")

    _, agent = make_agent([CodeActionMiddleware(executor, elicitation=True)], script)
    only_interrupt(await agent.ainvoke(user("book"), config("leak"), version="v2"))
    out = await agent.ainvoke(user("something else"), config("leak"), version="v2")
    assert not out.interrupts
    cancelled, following = tool_messages(out.value)
    assert cancelled.tool_call_id == "call_b" and "abandoned" in text_of(cancelled)
    assert following.tool_call_id == "call_s" and text_of(following).startswith("[")
    assert "declined" not in text_of(following), text_of(following)  # was: the cancelled one's notice


async def next_output(executor: CodeExecutor) -> str:
    """What the conversation's next execution prints, with a call on the same MCP connection."""
    result = await executor.execute(f"{BOOK}print(answers_seen(count=0))")
    assert result.error is None, result.error
    return result.text


async def test_a_direct_cancel_at_the_question_keeps_its_notice(executor: CodeExecutor) -> None:
    """The core path under the adapter: the code's own call (not in a thread) is cancelled."""
    run = executor.stream(f"{BOOK}print(book(flight='LX2'))")
    async for event in run:
        if isinstance(event, ElicitationRequest):
            await run.cancel("the user went on")
            break
    output = await next_output(executor)
    assert output.startswith("[") and "declined" not in output, output  # was: LX2's question's notice
