"""The agent's own tools called from the code (issue 24), in PydanticAI's terms: a FunctionModel, a
real kernel, the test MCP server; approvals are PydanticAI's own (deferred and inline)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from pai_kit import ScriptedModel, returns_of, roundtrip, stream_run, text_of
from pydantic import BaseModel
from pydantic_ai import (
    Agent,
    ApprovalRequired,
    DeferredToolRequests,
    DeferredToolResults,
    ModelRetry,
    RunContext,
    Tool,
    ToolApproved,
    ToolDenied,
    ToolReturn,
)
from pydantic_ai.capabilities import HandleDeferredToolCalls
from pydantic_ai.tools import ToolDefinition
from pydantic_ai.toolsets import FunctionToolset

from example_runner import run_example
from ipybox_core import ApprovalRules, CodeExecutor
from ipybox_core.hosttools import HostCall, HostTool
from ipybox_core.sessions import Sessions
from ipybox_integrations.pydantic_ai import ApprovalDecided, ApprovalRequested, CodeAction, pending_approvals
from servers import PYTHON, SERVE_SCRIPT
from servers.agent_tools_cells import REFUND_CELL
from servers.executors import executor_with_test_server, left_idle

pytestmark = pytest.mark.asyncio(loop_scope="package")


@pytest_asyncio.fixture(loop_scope="package", scope="module")
async def tools_executor(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[CodeExecutor]:
    """A kernel of this module (its host tools change from test to test) with the test MCP server."""
    async with executor_with_test_server(tmp_path_factory.mktemp("pai-host-tools")) as executor:
        yield executor


@pytest_asyncio.fixture(loop_scope="package")
async def executor(tools_executor: CodeExecutor) -> AsyncIterator[CodeExecutor]:
    """The module's executor; a test must leave it idle (nothing running or waiting for approval)."""
    async with left_idle(tools_executor) as ex:
        yield ex


def clerk(
    model: ScriptedModel, code_action: CodeAction[Any], refunded: list[str], *extra: Any
) -> Agent[dict[str, str], Any]:
    """An agent with three native tools: one needs approval, one reads deps, one raises ModelRetry."""
    agent = Agent(
        model.model,
        deps_type=dict[str, str],
        capabilities=[code_action, *extra],
        output_type=[str, DeferredToolRequests],
    )

    @agent.tool_plain(requires_approval=True)
    def refund(order: str) -> str:
        """Refund an order."""
        refunded.append(order)
        return f"refunded {order}"

    @agent.tool
    def whoami(ctx: RunContext[dict[str, str]]) -> dict[str, str]:
        """The signed-in user."""
        return {"user": ctx.deps["user"]}

    @agent.tool_plain
    def lookup(order: str) -> dict[str, str]:
        """Look an order up."""
        if not order.startswith("A-"):
            raise ModelRetry(f"no order {order}: order ids start with A-")
        return {"order": order, "status": "delivered"}

    return agent


async def run_answering(
    agent: Agent[dict[str, str], Any], answers: list[Any], deps: dict[str, str]
) -> tuple[Any, list[DeferredToolRequests]]:
    """Run; answer the n-th ``DeferredToolRequests`` with ``answers[n](requests)``."""
    result = await agent.run("go", deps=deps)
    seen: list[DeferredToolRequests] = []
    for answer in answers:
        assert isinstance(result.output, DeferredToolRequests), result.output
        seen.append(result.output)
        result = await agent.run(
            message_history=roundtrip(result.all_messages()),
            deferred_tool_results=answer(result.output),
            deps=deps,
        )
    return result, seen


def approve(requests: DeferredToolRequests) -> DeferredToolResults:
    return requests.build_results(approve_all=True)


async def test_one_cell_calls_the_agents_tools_and_an_mcp_tool_approved_natively(
    executor: CodeExecutor,
) -> None:
    refunded: list[str] = []
    model = ScriptedModel([REFUND_CELL])
    agent = clerk(model, CodeAction(executor), refunded)
    result, seen = await run_answering(
        agent,
        [
            approve,  # refund A-1
            lambda r: DeferredToolResults(
                approvals={r.approvals[0].tool_call_id: ToolDenied("not this one")}
            ),
            approve,  # the MCP call test.add
        ],
        deps={"user": "carol"},
    )
    names = [(r.approvals[0].tool_name, r.approvals[0].args_as_dict()) for r in seen]
    assert names == [("refund", {"order": "A-1"}), ("refund", {"order": "A-2"}), ("add", {"a": 20, "b": 22})]
    (held,) = pending_approvals(seen[0])
    assert (held.server, held.tool, held.name) == ("agent_tools", "refund", "agent_tools.refund")
    assert refunded == ["A-1"]  # asked before it ran; the denied one never ran
    out = text_of(returns_of(result)[-1])
    assert "{'user': 'carol'}" in out  # deps of the run, asked nothing
    assert "error: no order X-9: order ids start with A-" in out  # ModelRetry -> ToolError
    assert "refunded A-1" in out
    assert "refused: agent_tools.refund was rejected: not this one" in out
    assert "42" in out
    # the prompt lists the agent's tools (and never execute_code) next to the MCP tools
    instructions = model.infos[0].instructions or ""
    assert "from agent_tools import" in instructions
    assert "def refund(" in instructions
    assert "def execute_code(" not in instructions
    assert {tool.name for tool in executor.host_tools} == {"refund", "whoami", "lookup"}


async def test_inline_handler_approves_and_denies_each_call(executor: CodeExecutor) -> None:
    refunded: list[str] = []
    asked: list[str] = []

    async def handler(ctx: RunContext[Any], requests: DeferredToolRequests) -> DeferredToolResults:
        results = DeferredToolResults()
        for call in requests.approvals:
            asked.append(f"{call.tool_name}{call.args_as_dict()}")
            allowed = call.tool_name != "refund" or call.args_as_dict() == {"order": "A-1"}
            results.approvals[call.tool_call_id] = ToolApproved() if allowed else ToolDenied("only A-1")
        return results

    model = ScriptedModel([REFUND_CELL])
    agent = clerk(model, CodeAction(executor), refunded, HandleDeferredToolCalls(handler=handler))
    result = await agent.run("go", deps={"user": "dave"})
    assert asked == ["refund{'order': 'A-1'}", "refund{'order': 'A-2'}", "add{'a': 20, 'b': 22}"]
    assert refunded == ["A-1"]
    out = str(result.output)
    assert "refunded A-1" in out
    assert "refused: agent_tools.refund was rejected: only A-1" in out
    assert "{'user': 'dave'}" in out


async def test_approval_events_only_for_the_calls_that_ask(executor: CodeExecutor) -> None:
    async def handler(ctx: RunContext[Any], requests: DeferredToolRequests) -> DeferredToolResults:
        return requests.build_results(approve_all=True)

    code = "from agent_tools import refund, whoami, lookup\nprint(whoami(), lookup(order='A-3'), refund(order='A-3'))"
    refunded: list[str] = []
    agent = clerk(
        ScriptedModel([code]), CodeAction(executor), refunded, HandleDeferredToolCalls(handler=handler)
    )
    events, result = await stream_run(agent, "go", deps={"user": "gus"})
    asked = [e.approval.name for e in events if isinstance(e, ApprovalRequested)]
    decided = [(e.name, e.approved) for e in events if isinstance(e, ApprovalDecided)]
    assert asked == ["agent_tools.refund"]  # whoami and lookup ran without asking
    assert decided == [("agent_tools.refund", True)]
    assert refunded == ["A-3"]
    assert "refunded A-3" in str(result.output)


async def test_approval_required_raised_by_the_tool_holds_the_call(executor: CodeExecutor) -> None:
    paid: list[tuple[float, bool]] = []

    def pay(ctx: RunContext[Any], amount: float) -> str:
        """Pay out; above 100 it needs approval."""
        if amount > 100 and not ctx.tool_call_approved:
            raise ApprovalRequired(metadata={"reason": "large"})
        paid.append((amount, ctx.tool_call_approved))
        return f"paid {amount:g}"

    code = "from agent_tools import pay\nprint(pay(amount=5), pay(amount=500))"
    agent = Agent(
        ScriptedModel([code]).model,
        tools=[Tool(pay, takes_ctx=True)],
        capabilities=[CodeAction(executor)],
        output_type=[str, DeferredToolRequests],
    )
    result = await agent.run("go")
    assert isinstance(result.output, DeferredToolRequests)
    (call,) = result.output.approvals
    assert (call.tool_name, call.args_as_dict()) == ("pay", {"amount": 500})
    assert result.output.metadata[call.tool_call_id]["tool_metadata"] == {"reason": "large"}
    assert paid == [(5, False)]  # the small one ran unasked
    result = await agent.run(
        message_history=roundtrip(result.all_messages()),
        deferred_tool_results=DeferredToolResults(approvals={call.tool_call_id: True}),
    )
    assert paid == [(5, False), (500, True)]
    assert "paid 5 paid 500" in str(result.output)


async def test_selection_false_a_list_and_a_predicate(executor: CodeExecutor) -> None:
    probe = "import agent_tools, inspect\nprint(sorted(n for n in dir(agent_tools) if not n.startswith('_') and not n.isupper()))"
    seen: dict[str, str] = {}
    selections: dict[str, Any] = {
        "list": ["whoami"],
        "predicate": lambda tool: tool.kind == "unapproved",
        "all": True,
    }
    for label, selection in selections.items():
        agent = clerk(ScriptedModel([probe]), CodeAction(executor, agent_tools=selection), [])
        result = await agent.run("go", deps={"user": "x"})
        seen[label] = str(result.output)
    assert "['whoami']" in seen["list"]
    assert "['refund']" in seen["predicate"]
    assert "['lookup', 'refund', 'whoami']" in seen["all"]

    # the application's own host tool stays next to the agent's; False takes the agent's away
    async def app_ping(call: HostCall) -> str:
        return "app pong"

    await executor.register_host_tools([*executor.host_tools, HostTool("app_ping", app_ping)])
    try:
        await clerk(ScriptedModel([probe]), CodeAction(executor), []).run("go", deps={"user": "x"})
        assert {tool.name for tool in executor.host_tools} == {"app_ping", "lookup", "refund", "whoami"}
        model = ScriptedModel([probe])
        result = await clerk(model, CodeAction(executor, agent_tools=False), []).run("go", deps={"user": "x"})
        assert "['app_ping']" in str(result.output)
        assert "def refund(" not in (model.infos[0].instructions or "")
    finally:
        await executor.register_host_tools([])


async def test_prepare_and_toolsets_per_run_step(executor: CodeExecutor) -> None:
    async def only_for_admins(ctx: RunContext[dict[str, str]], tool: ToolDefinition) -> ToolDefinition | None:
        return tool if ctx.deps.get("role") == "admin" else None

    def wipe() -> str:
        """Wipe the cache."""
        return "wiped"

    def ping() -> str:
        """A tool of a toolset."""
        return "pong"

    code = "import agent_tools\nprint(sorted(n for n in dir(agent_tools) if not n.startswith('_') and not n.isupper()))"
    for role, expected in (("admin", "['ping', 'wipe']"), ("guest", "['ping']")):
        agent = Agent(
            ScriptedModel([code]).model,
            deps_type=dict[str, str],
            tools=[Tool(wipe, prepare=only_for_admins)],
            toolsets=[FunctionToolset([ping])],
            capabilities=[CodeAction(executor)],
        )
        result = await agent.run("go", deps={"role": role})
        assert expected in str(result.output), role


async def test_the_agents_mcp_toolset_is_callable_from_the_code(executor: CodeExecutor) -> None:
    from fastmcp.client import Client
    from fastmcp.client.transports import StdioTransport
    from pydantic_ai.mcp import MCPToolset

    toolset = MCPToolset(Client(StdioTransport(PYTHON, [str(SERVE_SCRIPT), "stdio"])), id="agent_mcp")
    code = (
        "from agent_tools import add, echo, fail\n"
        "from ipybox_core.errors import ToolError\n"
        "print(add(a=2, b=3), echo(message='hi'))\n"
        "try:\n    fail()\nexcept ToolError as error:\n    print('failed:', error)\n"
    )
    agent = Agent(ScriptedModel([code]).model, toolsets=[toolset], capabilities=[CodeAction(executor)])
    async with agent:
        result = await agent.run("go")
    out = str(result.output)
    assert "5 hi" in out
    assert "failed: Error executing tool fail: the widget is broken" in out  # ModelRetry -> ToolError
    assert "add" in {tool.name for tool in executor.host_tools}


class Order(BaseModel):
    order_id: str
    lines: list[str]
    total_usd: float


async def test_results_keep_their_structure(executor: CodeExecutor) -> None:
    def order(order_id: str) -> Order:
        """One order."""
        return Order(order_id=order_id, lines=["book", "pen"], total_usd=12.5)

    def recent() -> list[Order]:
        """Recent orders."""
        return [Order(order_id="A-1", lines=[], total_usd=1.0)]

    def receipt(order_id: str) -> ToolReturn:
        """A receipt, with metadata for the application only."""
        return ToolReturn(return_value={"order_id": order_id, "paid": True}, metadata={"internal": 1})

    code = (
        "from agent_tools import order, recent, receipt\n"
        "o = order(order_id='A-2')\n"
        "print(type(o).__name__, o.lines, o.total_usd * 2, recent()[0].order_id, receipt(order_id='A-2'))\n"
    )
    agent = Agent(
        ScriptedModel([code]).model,
        tools=[order, recent, receipt],
        capabilities=[CodeAction(executor)],
    )
    result = await agent.run("go")
    assert "Order ['book', 'pen'] 25.0 A-1 {'order_id': 'A-2', 'paid': True}" in str(result.output)


async def test_a_raising_tool_a_hang_and_a_keyword_name(executor: CodeExecutor) -> None:
    release = asyncio.Event()

    def broken() -> str:
        """Always fails."""
        raise ValueError("the ledger is locked")

    async def stuck() -> str:
        """Never answers."""
        await release.wait()
        return "late"

    def klass() -> str:
        """A tool whose name is a Python keyword."""
        return "class works"

    code = (
        "from agent_tools import broken, stuck, class_\n"
        "from ipybox_core.errors import ToolError, ToolTimeoutError\n"
        "try:\n    broken()\nexcept ToolError as error:\n    print('raised:', error)\n"
        "try:\n    stuck()\nexcept ToolTimeoutError as error:\n    print('timed out:', type(error).__name__)\n"
        "print(class_())\n"
    )
    agent = Agent(
        ScriptedModel([code, "print('still usable')"]).model,
        tools=[Tool(broken), Tool(stuck, timeout=1), Tool(klass, name="class")],
        capabilities=[CodeAction(executor)],
    )
    try:
        result = await agent.run("go")
    finally:
        release.set()
    first, second = (text_of(part) for part in returns_of(result))
    assert "raised: the ledger is locked" in first
    assert "timed out: ToolTimeoutError" in first
    assert "class works" in first
    assert "still usable" in second


async def test_a_call_the_executor_rules_allow_runs_without_asking(tmp_path: Path) -> None:
    refunded: list[str] = []
    code = "from agent_tools import refund, whoami\nprint(refund(order='A-7'), whoami())"
    rules = ApprovalRules(allow=["agent_tools.*"])
    async with CodeExecutor(workspace=tmp_path, approval=rules) as executor:
        agent = clerk(ScriptedModel([code]), CodeAction(executor), refunded)
        result = await agent.run("go", deps={"user": "erin"})
    assert refunded == ["A-7"]
    assert "refunded A-7 {'user': 'erin'}" in str(result.output)


async def test_the_audit_log_records_who_decided_each_call_and_an_edit(tmp_path: Path) -> None:
    refunded: list[str] = []
    code = "from agent_tools import refund, whoami\nprint(whoami(), refund(order='A-1'))"
    audit = tmp_path / "audit.jsonl"

    def edit(requests: DeferredToolRequests) -> DeferredToolResults:
        (call,) = requests.approvals
        return DeferredToolResults(
            approvals={call.tool_call_id: ToolApproved(override_args={"order": "A-9"})}
        )

    async with CodeExecutor(workspace=tmp_path / "ws", audit_log=audit) as executor:
        agent = clerk(ScriptedModel([code]), CodeAction(executor), refunded)
        result, _ = await run_answering(agent, [edit], deps={"user": "fay"})
    assert refunded == ["A-9"]
    assert "{'user': 'fay'} refunded A-9" in str(result.output)
    records = [json.loads(line) for line in audit.read_text().splitlines()]
    decided = [(r["server"], r["tool"], r["decided_by"]) for r in records if "decided_by" in r]
    assert decided == [("agent_tools", "whoami", "tool:no-approval"), ("agent_tools", "refund", "user")]
    assert records[-1]["edited_args"] == {"order": "A-9"}


async def test_a_held_call_runs_once_while_another_capability_serves_other_conversations(
    tmp_path: Path,
) -> None:
    """Two capabilities over one Sessions: the first parks a refund, the second registers the same
    tools for another conversation meanwhile, the first resumes its call; the refund runs once."""
    refunded: list[str] = []
    code = "from agent_tools import refund\nprint(refund(order='A-5'))"
    async with Sessions(root=tmp_path, warm=0) as sessions:

        def per_request() -> Agent[dict[str, str], Any]:
            return clerk(ScriptedModel([code, "print('hi')"]), CodeAction(sessions), refunded)

        first = per_request()
        parked = await first.run("go", deps={"user": "a"}, conversation_id="one")
        assert isinstance(parked.output, DeferredToolRequests)
        other = await per_request().run("go", deps={"user": "b"}, conversation_id="two")
        assert isinstance(other.output, DeferredToolRequests)  # its own refund waits too
        resumed = await first.run(
            message_history=roundtrip(parked.all_messages()),
            deferred_tool_results=approve(parked.output),
            deps={"user": "a"},
            conversation_id="one",
        )
        await sessions.close_session("two")
    assert refunded == ["A-5"]
    assert "refunded A-5" in text_of(returns_of(resumed)[0])


async def test_the_example_asks_for_each_refund_and_runs_the_rest_unasked() -> None:
    done = await asyncio.to_thread(run_example, "pydantic_ai_own_tools.py", "--offline", "--yes")
    out = done.stdout
    asked = [line for line in out.splitlines() if line.startswith("approve ")]
    assert asked == [
        "approve agent_tools.refund(order_id='ord-1', amount_usd=30)? [y/N] y (auto)",
        "approve agent_tools.refund(order_id='ord-3', amount_usd=8.5)? [y/N] y (auto)",
    ]
    assert "refunded 30.00 USD for ord-1 (27.60 EUR)" in out
    assert "refunded 8.50 USD for ord-3 (7.82 EUR)" in out
    assert "skipped: no order ord-9: check the id" in out  # ModelRetry -> ToolError
