"""Usage: each MCP call the code sends is a tool call of the run, and ``UsageLimits(tool_calls_limit=)``
stops the call that would pass the limit (not the model's next tool call, after the fact)."""

from __future__ import annotations

import pytest
from pai_kit import ScriptedModel
from pydantic_ai import Agent, DeferredToolRequests, UsageLimitExceeded, UsageLimits
from pydantic_ai.capabilities import HandleDeferredToolCalls

from ipybox_core import CodeExecutor
from ipybox_integrations.pydantic_ai import CodeAction

pytestmark = pytest.mark.asyncio(loop_scope="package")

TWO_CALLS = (
    "from mcptools.test import count\n"
    "first = count(tag='usage-first')\n"
    "second = count(tag='usage-second')\n"
    "print(first, second)"
)


def approving_agent(executor: CodeExecutor, code: str) -> Agent[None, object]:
    return Agent(
        ScriptedModel([code]).model,
        capabilities=[
            CodeAction(executor),
            HandleDeferredToolCalls(handler=lambda _, requests: requests.build_results(approve_all=True)),
        ],
        output_type=[str, DeferredToolRequests],
    )


async def test_each_sent_call_counts_as_a_tool_call(executor: CodeExecutor) -> None:
    result = await approving_agent(executor, TWO_CALLS).run("go")
    assert str(result.output).startswith("done: ")
    assert result.usage.tool_calls == 3  # execute_code and the two MCP calls it made


async def test_the_call_past_the_tool_calls_limit_is_not_sent_and_the_run_says_why(
    executor: CodeExecutor,
) -> None:
    counts = "from mcptools.test import count\nprint(count(tag='usage-first'), count(tag='usage-second'))"
    before = (await executor.execute(counts, approve_all=True)).text.split()
    with pytest.raises(UsageLimitExceeded, match="tool_calls_limit of 2"):
        await approving_agent(executor, TWO_CALLS).run("go", usage_limits=UsageLimits(tool_calls_limit=2))
    assert not executor.busy  # the execution was stopped where the limit was reached
    after = (await executor.execute(counts, approve_all=True)).text.split()
    # the first call (within the limit) ran; the second never reached the server
    assert [int(a) - int(b) for a, b in zip(after, before, strict=True)] == [2, 1]
