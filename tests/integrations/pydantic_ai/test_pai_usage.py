"""Usage: each tool call the code makes is a tool call of the run (held or let through by the
approval policy), ``execute_code`` itself is none, as for a native agent making the same calls
through PydanticAI's own MCP toolset; ``UsageLimits(tool_calls_limit=)`` stops the call that would
pass the limit before it reaches the MCP server."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager

import pytest
from fastmcp.client import Client
from fastmcp.client.transports import StdioTransport
from pai_kit import ScriptedModel
from pydantic_ai import (
    Agent,
    DeferredToolRequests,
    DeferredToolResults,
    ModelMessage,
    ModelResponse,
    RunUsage,
    TextPart,
    ToolCallPart,
    ToolDenied,
    ToolReturnPart,
    UsageLimitExceeded,
    UsageLimits,
)
from pydantic_ai.capabilities import HandleDeferredToolCalls
from pydantic_ai.mcp import MCPToolset
from pydantic_ai.models.function import AgentInfo, FunctionModel

from ipybox_core import ApprovalRules, CodeExecutor
from ipybox_integrations.pydantic_ai import CodeAction
from servers import PYTHON, SERVE_SCRIPT

pytestmark = pytest.mark.asyncio(loop_scope="package")

TWO_CALLS = (
    "from mcptools.test import count\n"
    "first = count(tag='usage-first')\n"
    "second = count(tag='usage-second')\n"
    "print(first, second)"
)
COUNTS = "from mcptools.test import count\nprint(count(tag='usage-first'), count(tag='usage-second'))"


def approving_agent(executor: CodeExecutor, code: str) -> Agent[None, object]:
    return Agent(
        ScriptedModel([code]).model,
        capabilities=[
            CodeAction(executor),
            HandleDeferredToolCalls(handler=lambda _, requests: requests.build_results(approve_all=True)),
        ],
        output_type=[str, DeferredToolRequests],
    )


def rejecting_second_agent(executor: CodeExecutor, code: str) -> Agent[None, object]:
    def decide(_: object, requests: DeferredToolRequests) -> DeferredToolResults:
        results = requests.build_results(approve_all=True)
        for call in requests.approvals:
            if call.args_as_dict().get("tag") == "usage-second":
                results.approvals[call.tool_call_id] = ToolDenied("not this one")
        return results

    return Agent(
        ScriptedModel([code]).model,
        capabilities=[CodeAction(executor), HandleDeferredToolCalls(handler=decide)],
        output_type=[str, DeferredToolRequests],
    )


async def native_usage(tags: list[str]) -> RunUsage:
    """The usage of a native agent that calls the test MCP server's ``count`` once per tag (one
    model response with the calls, then the answer), through PydanticAI's own MCP toolset."""

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            return ModelResponse(
                parts=[
                    ToolCallPart("count", {"tag": tag}, tool_call_id=f"native_{i}")
                    for i, tag in enumerate(tags)
                ]
            )
        return ModelResponse(parts=[TextPart("done")])

    toolset = MCPToolset(Client(StdioTransport(PYTHON, [str(SERVE_SCRIPT), "stdio"])), id="native_mcp")
    agent = Agent(FunctionModel(respond), toolsets=[toolset])
    async with agent:
        return (await agent.run("go")).usage


def same_usage(ours: RunUsage, native: RunUsage) -> None:
    """Compared where a scripted model makes them comparable (its token counts are estimates of
    different messages)."""
    assert (ours.requests, ours.tool_calls) == (native.requests, native.tool_calls)


@contextmanager
def policy(executor: CodeExecutor, rules: ApprovalRules | None) -> Iterator[None]:
    """The executor's policy is ``rules`` for a while (``None``: unchanged, every call asks)."""
    before = executor.approval
    if rules is not None:
        executor.approval = rules
    try:
        yield
    finally:
        executor.approval = before


def allowing_count(executor: CodeExecutor) -> AbstractContextManager[None]:
    """The executor's policy lets ``test.count`` through without asking."""
    return policy(executor, ApprovalRules(allow=["test.count"]))


AGENT_TOOL_POLICIES = pytest.mark.parametrize(
    "rules", [None, ApprovalRules(allow=["agent_tools.*"])], ids=["held", "allowed"]
)


async def server_counts(executor: CodeExecutor) -> list[int]:
    """The MCP server's counters of the two tags (each read adds one)."""
    return [int(n) for n in (await executor.execute(COUNTS, approve_all=True)).text.split()]


async def test_approved_calls_count_as_a_native_agents_calls(executor: CodeExecutor) -> None:
    result = await approving_agent(executor, TWO_CALLS).run("go")
    assert str(result.output).startswith("done: ")
    assert result.usage.tool_calls == 2  # the two MCP calls; execute_code itself is none
    same_usage(result.usage, await native_usage(["native-first", "native-second"]))


async def test_calls_the_policy_lets_through_count_as_a_native_agents_calls(executor: CodeExecutor) -> None:
    with allowing_count(executor):
        result = await approving_agent(executor, TWO_CALLS).run("go")
    assert str(result.output).startswith("done: ")
    assert result.usage.tool_calls == 2
    same_usage(result.usage, await native_usage(["native-first", "native-second"]))


async def test_a_rejected_call_is_not_counted(executor: CodeExecutor) -> None:
    code = TWO_CALLS.replace(
        "second = count(tag='usage-second')",
        "try:\n    second = count(tag='usage-second')\nexcept PermissionError:\n    second = 'no'",
    )
    result = await rejecting_second_agent(executor, code).run("go")
    assert str(result.output).startswith("done: ")
    assert result.usage.tool_calls == 1  # as a native agent's denied call, which never runs


async def check_limit_stops_the_second_call(executor: CodeExecutor) -> None:
    before = await server_counts(executor)
    with pytest.raises(UsageLimitExceeded, match="tool_calls_limit of 1"):
        await approving_agent(executor, TWO_CALLS).run("go", usage_limits=UsageLimits(tool_calls_limit=1))
    assert not executor.busy  # the execution was stopped where the limit was reached
    after = await server_counts(executor)
    # the first call (within the limit) ran; the second never reached the server
    assert [a - b for a, b in zip(after, before, strict=True)] == [2, 1]


async def test_the_held_call_past_the_tool_calls_limit_is_not_sent_and_the_run_says_why(
    executor: CodeExecutor,
) -> None:
    await check_limit_stops_the_second_call(executor)


async def test_the_allowed_call_past_the_tool_calls_limit_is_not_sent_and_the_run_says_why(
    executor: CodeExecutor,
) -> None:
    with allowing_count(executor):
        await check_limit_stops_the_second_call(executor)


async def test_calls_within_the_limit_all_run(executor: CodeExecutor) -> None:
    with allowing_count(executor):
        result = await approving_agent(executor, TWO_CALLS).run(
            "go", usage_limits=UsageLimits(tool_calls_limit=2)
        )
    assert result.usage.tool_calls == 2  # execute_code takes no part of the limit


DOUBLES = "from agent_tools import double\nprint(double(x=2), double(x=3))"


def doubling_agent(ran: list[int], model: FunctionModel) -> Agent[None, object]:
    """An agent whose own tool ``double`` records each run."""
    agent: Agent[None, object] = Agent(model, output_type=[str, DeferredToolRequests])

    @agent.tool_plain
    def double(x: int) -> int:
        """Twice ``x``."""
        ran.append(x)
        return 2 * x

    return agent


async def native_doubles_usage() -> RunUsage:
    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            return ModelResponse(
                parts=[ToolCallPart("double", {"x": x}, tool_call_id=f"d{x}") for x in (2, 3)]
            )
        return ModelResponse(parts=[TextPart("done")])

    return (await doubling_agent([], FunctionModel(respond)).run("go")).usage


@AGENT_TOOL_POLICIES
async def test_the_agents_own_tools_count_as_a_native_agents_calls(
    executor: CodeExecutor, rules: ApprovalRules | None
) -> None:
    ran: list[int] = []
    agent = doubling_agent(ran, ScriptedModel([DOUBLES]).model)
    with policy(executor, rules):
        result = await agent.run("go", capabilities=[CodeAction(executor)])
    assert str(result.output).startswith("done: 4 6")
    assert ran == [2, 3]
    same_usage(result.usage, await native_doubles_usage())


@AGENT_TOOL_POLICIES
async def test_the_agents_tool_call_past_the_limit_does_not_run(
    executor: CodeExecutor, rules: ApprovalRules | None
) -> None:
    ran: list[int] = []
    agent = doubling_agent(ran, ScriptedModel([DOUBLES]).model)
    limits = UsageLimits(tool_calls_limit=1)
    with policy(executor, rules), pytest.raises(UsageLimitExceeded, match="tool_calls_limit of 1"):
        await agent.run("go", capabilities=[CodeAction(executor)], usage_limits=limits)
    assert ran == [2]
    assert not executor.busy


ONE_CALL = "from mcptools.test import count\nprint(count(tag='usage-first'))"


async def deferred_then_approved(agent: Agent[None, object]) -> tuple[RunUsage, RunUsage]:
    """The usage of the run that defers the call, then of the run that approves it."""
    first = await agent.run("go")
    assert isinstance(first.output, DeferredToolRequests)
    second = await agent.run(
        message_history=first.all_messages(),
        deferred_tool_results=first.output.build_results(approve_all=True),
    )
    assert isinstance(second.output, str)
    return first.usage, second.usage


async def test_a_deferred_call_counts_in_the_run_that_approves_it_as_a_native_one(
    executor: CodeExecutor,
) -> None:
    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if not any(isinstance(part, ToolReturnPart) for message in messages for part in message.parts):
            return ModelResponse(
                parts=[ToolCallPart("count", {"tag": "native-first"}, tool_call_id="native")]
            )
        return ModelResponse(parts=[TextPart("done")])

    toolset = MCPToolset(Client(StdioTransport(PYTHON, [str(SERVE_SCRIPT), "stdio"])), id="native_mcp")
    native = Agent(
        FunctionModel(respond),
        toolsets=[toolset.approval_required()],
        output_type=[str, DeferredToolRequests],
    )
    async with native:
        native_usages = await deferred_then_approved(native)
    ours = Agent(
        ScriptedModel([ONE_CALL]).model,
        capabilities=[CodeAction(executor)],
        output_type=[str, DeferredToolRequests],
    )
    our_usages = await deferred_then_approved(ours)
    for usage, native_usage_of_run in zip(our_usages, native_usages, strict=True):
        same_usage(usage, native_usage_of_run)
    assert [usage.tool_calls for usage in our_usages] == [0, 1]


PARALLEL_CALLS = (
    "import threading\n"
    "from mcptools.test import count\n"
    "start = threading.Barrier(3)\n"
    "def call():\n"
    "    start.wait()\n"
    "    try:\n"
    "        count(tag='usage-parallel')\n"
    "    except PermissionError:\n"
    "        pass\n"
    "threads = [threading.Thread(target=call) for _ in range(3)]\n"
    "for thread in threads: thread.start()\n"
    "for thread in threads: thread.join()\n"
)


async def test_calls_made_at_once_never_pass_the_limit(executor: CodeExecutor) -> None:
    read = "from mcptools.test import count\nprint(count(tag='usage-parallel'))"
    before = int((await executor.execute(read, approve_all=True)).text)
    with allowing_count(executor), pytest.raises(UsageLimitExceeded, match="tool_calls_limit of 2"):
        await approving_agent(executor, PARALLEL_CALLS).run(
            "go", usage_limits=UsageLimits(tool_calls_limit=2)
        )
    after = int((await executor.execute(read, approve_all=True)).text)
    assert after - before - 1 <= 2  # the calls let on while others were still running count too


async def test_a_run_at_its_limit_gets_no_further_execute_code(executor: CodeExecutor) -> None:
    model = ScriptedModel([TWO_CALLS, "print('never runs')"])
    agent = Agent(model.model, capabilities=[CodeAction(executor)], output_type=[str, DeferredToolRequests])
    with allowing_count(executor), pytest.raises(UsageLimitExceeded, match="tool_calls_limit of 2"):
        await agent.run("go", usage_limits=UsageLimits(tool_calls_limit=2))
    assert model.calls == 2  # PydanticAI refused the second execute_code before it ran, as a native call
