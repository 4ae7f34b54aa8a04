"""The agent's own LangChain tools called from the code (issue 24): ``CodeActionMiddleware`` gives the
code the tools of ``create_agent`` as ``from agent_tools import ...``; the agent's
``HumanInTheLoopMiddleware(interrupt_on=...)`` decides which calls interrupt. Scripted chat model,
real kernels, the real test MCP server, a real LangGraph checkpointer."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Annotated, Any

import pytest
import pytest_asyncio
from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware, HumanInTheLoopMiddleware
from langchain.agents.middleware.human_in_the_loop import HITLRequest, HITLResponse
from langchain.tools import ToolRuntime
from langchain_core.tools import BaseTool, InjectedToolCallId, StructuredTool, ToolException, tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.prebuilt import InjectedState
from langgraph.types import Command
from lc_kit import (
    ScriptedChatModel,
    ToolRuns,
    config,
    only_interrupt,
    run_code_then_finish,
    text_of,
    tool_messages,
)

from example_runner import documented, run_example
from ipybox_core import ApprovalRules, CodeExecutor, ConfigError
from ipybox_core.hosttools import HostCall, HostTool
from ipybox_core.sessions import Sessions
from ipybox_integrations.langchain import CodeActionMiddleware
from servers.agent_tools_cells import CALLS_CELL as CELL

pytestmark = pytest.mark.asyncio(loop_scope="package")

CONTEXT = {"user": "carol"}


@pytest_asyncio.fixture(loop_scope="package")
async def executor(idle_executor: CodeExecutor) -> AsyncIterator[CodeExecutor]:
    """The package's shared kernel; the agent tools a test registers leave with it."""
    yield idle_executor
    await idle_executor.register_host_tools([])


def clerk_tools(refunded: list[str]) -> list[BaseTool]:
    @tool
    def refund(order: str) -> str:
        """Refund an order."""
        refunded.append(order)
        return f"refunded {order}"

    @tool
    def whoami(runtime: ToolRuntime[dict[str, str], Any]) -> dict[str, Any]:
        """The signed-in user and how long the conversation is."""
        return {"user": runtime.context["user"], "messages": len(runtime.state["messages"])}

    @tool
    def lookup(order: str) -> dict[str, str]:
        """Look an order up."""
        raise ToolException(f"no order {order}")

    return [refund, whoami, lookup]


def agent_of(
    tools: list[BaseTool], middleware: list[AgentMiddleware[Any, Any, Any]], *codes: str
) -> tuple[ScriptedChatModel, Any]:
    model = ScriptedChatModel(script=run_code_then_finish(*codes))
    agent = create_agent(
        model, tools=tools, middleware=middleware, checkpointer=InMemorySaver(), context_schema=dict
    )
    return model, agent


async def start(agent: Any, thread: str) -> Any:
    return await agent.ainvoke(
        {"messages": [{"role": "user", "content": "go"}]},
        config(thread),
        context=CONTEXT,
        version="v2",
    )


async def resume(agent: Any, thread: str, answer: Any) -> Any:
    """Resume with the answer (LangGraph's run context is given again on every invocation)."""
    return await agent.ainvoke(Command(resume=answer), config(thread), context=CONTEXT, version="v2")


async def run_to_end(agent: Any, thread: str, decide: Any = None) -> tuple[Any, list[dict[str, Any]]]:
    """Run, answering every interrupt with ``decide(value)`` (default: approve); the asked values."""
    asked: list[dict[str, Any]] = []
    out = await start(agent, thread)
    while out.interrupts:
        value = only_interrupt(out).value
        asked.append(value)
        answer = decide(value) if decide is not None else {"decisions": [{"type": "approve"}]}
        out = await resume(agent, thread, answer)
    return out, asked


async def result_text(agent: Any, thread: str) -> str:
    state = await agent.aget_state(config(thread))
    return text_of(tool_messages(state.values)[0])


def action_names(asked: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    return [(value["action_requests"][0]["name"], value["action_requests"][0]["args"]) for value in asked]


async def test_three_agent_tools_and_an_mcp_tool_in_one_cell(executor: CodeExecutor) -> None:
    refunded: list[str] = []
    hitl = HumanInTheLoopMiddleware(
        interrupt_on={"refund": {"allowed_decisions": ["approve", "reject"], "description": "Money moves"}}
    )
    code = CodeActionMiddleware(executor, human_in_the_loop=hitl)
    model, agent = agent_of(clerk_tools(refunded), [hitl, code], CELL)

    _, asked = await run_to_end(agent, "three")

    # only the tool the agent's interrupt_on gates, and the MCP call, interrupt the run
    assert action_names(asked) == [
        ("agent_tools.refund", {"order": "A-1"}),
        ("agent_tools.refund", {"order": "A-2"}),
        ("test.add", {"a": 20, "b": 22}),
    ]
    assert asked[0]["action_requests"][0]["description"] == "Money moves"
    assert asked[0]["review_configs"][0]["allowed_decisions"] == ["approve", "reject"]
    assert refunded == ["A-1", "A-2"]
    assert (await result_text(agent, "three")).splitlines() == [
        "{'user': 'carol', 'messages': 2}",  # the runtime's context and state: the user turn and the call
        "error: no order X-9",
        "refunded A-1",
        "refunded A-2",
        "42",
    ]
    system = model.calls[0][0].text
    assert "# from agent_tools import ...\ndef lookup(*, order: str) -> dict[str, str]:" in system
    assert "def whoami() -> dict[str, Any]:" in system  # the runtime parameter is the framework's
    assert "def execute_code" not in system


async def test_without_the_agents_hitl_every_held_call_is_asked_like_an_mcp_call(
    executor: CodeExecutor,
) -> None:
    code = CodeActionMiddleware(executor)
    _, agent = agent_of(clerk_tools([]), [code], "from agent_tools import whoami\nprint(whoami()['user'])")
    _, asked = await run_to_end(agent, "no-hitl")
    assert action_names(asked) == [("agent_tools.whoami", {})]
    assert "The code calls the agent's tool whoami" in asked[0]["action_requests"][0]["description"]
    assert (await result_text(agent, "no-hitl")).strip() == "carol"


async def test_gated_calls_are_edited_and_rejected_per_call(executor: CodeExecutor) -> None:
    refunded: list[str] = []
    hitl = HumanInTheLoopMiddleware(interrupt_on={"refund": True}, interrupt_mode="per_call")
    code = CodeActionMiddleware(executor, human_in_the_loop=hitl)  # per_call: the HITL's mode
    cell = (
        "from agent_tools import refund\nprint(refund(order='B-1'))\n"
        "try:\n    refund(order='B-2')\nexcept PermissionError as e:\n    print('no:', e)"
    )
    _, agent = agent_of(clerk_tools(refunded), [hitl, code], cell)

    first = only_interrupt(await start(agent, "edit"))
    assert first.value["type"] == "tool_approval"
    assert (first.value["name"], first.value["args"]) == ("agent_tools.refund", {"order": "B-1"})
    wrong = {"type": "edit", "edited_action": {"name": "agent_tools.refund", "args": {"order": 7}}}
    with pytest.raises(ValueError, match="order: 7 is not of type 'string'"):  # the tool's schema
        await resume(agent, "edit", {first.id: wrong})
    edit = {"type": "edit", "edited_action": {"name": "agent_tools.refund", "args": {"order": "B-9"}}}
    second = only_interrupt(await resume(agent, "edit", {first.id: edit}))
    assert second.value["args"] == {"order": "B-2"}
    out = await resume(agent, "edit", {second.id: {"type": "reject", "message": "not that one"}})

    assert not out.interrupts
    assert refunded == ["B-9"]  # the edited call ran, the rejected one never did
    text = await result_text(agent, "edit")
    assert "refunded B-9" in text and "no: agent_tools.refund was rejected: not that one" in text
    assert "a human reviewer edited" in text


async def test_a_when_predicate_gates_only_the_calls_it_takes(executor: CodeExecutor) -> None:
    refunded: list[str] = []
    hitl = HumanInTheLoopMiddleware(
        interrupt_on={
            "refund": {
                "allowed_decisions": ["approve", "reject"],
                "when": lambda request: request.tool_call["args"]["order"].startswith("BIG"),
                "description": lambda call, state, runtime: (
                    f"refund {call['args']['order']} after {len(state['messages'])} messages"
                ),
            }
        }
    )
    code = CodeActionMiddleware(executor, human_in_the_loop=hitl)
    cell = "from agent_tools import refund\nfor order in ['S-1', 'BIG-2']:\n    print(refund(order=order))"
    _, agent = agent_of(clerk_tools(refunded), [hitl, code], cell)
    _, asked = await run_to_end(agent, "when")
    assert action_names(asked) == [("agent_tools.refund", {"order": "BIG-2"})]
    assert asked[0]["action_requests"][0]["description"] == "refund BIG-2 after 2 messages"
    assert refunded == ["S-1", "BIG-2"]


async def test_selection_by_name_predicate_or_none(executor: CodeExecutor) -> None:
    probe = (
        "import agent_tools\n"
        "print(sorted(n for n in dir(agent_tools) if not n.startswith('_') and n[0].islower()))"
    )
    hitl = HumanInTheLoopMiddleware(interrupt_on={})
    for selection, expected in (
        (["whoami"], "['whoami']"),
        (lambda t: t.name != "refund", "['lookup', 'whoami']"),
        (True, "['lookup', 'refund', 'whoami']"),
    ):
        code = CodeActionMiddleware(executor, agent_tools=selection, human_in_the_loop=hitl)
        _, agent = agent_of(clerk_tools([]), [hitl, code], probe)
        await run_to_end(agent, f"select-{expected}")
        assert expected in await result_text(agent, f"select-{expected}")
    with pytest.raises(ConfigError, match="list of tool names"):
        CodeActionMiddleware(executor, agent_tools="whoami")


async def test_injected_state_tool_call_id_and_handled_errors(executor: CodeExecutor) -> None:
    @tool
    def history(
        messages: Annotated[list[Any], InjectedState("messages")], call: Annotated[str, InjectedToolCallId]
    ) -> str:
        """How many messages the conversation has."""
        return f"{len(messages)} messages, call {call.split('-')[0]}"

    @tool
    def strict(order: str) -> str:
        """Fails with a handled error."""
        raise ToolException(f"order {order} is locked")

    strict.handle_tool_error = lambda error: f"strict says: {error}"

    @tool
    def crash(order: str) -> str:
        """Fails with any exception."""
        raise RuntimeError(f"crashed on {order}")

    cell = (
        "from agent_tools import crash, history, strict\nfrom ipybox_core.errors import ToolError\n"
        "print(history())\nfor f in (strict, crash):\n    try:\n        f(order='Q')\n"
        "    except ToolError as e:\n        print(type(e).__name__, e)"
    )
    hitl = HumanInTheLoopMiddleware(interrupt_on={})
    code = CodeActionMiddleware(executor, human_in_the_loop=hitl)
    _, agent = agent_of([history, strict, crash], [hitl, code], cell)
    _, asked = await run_to_end(agent, "inject")
    assert asked == []
    assert (await result_text(agent, "inject")).splitlines() == [
        "2 messages, call ipybox",
        "ToolError strict says: order Q is locked",
        "ToolError crashed on Q",
    ]


async def test_a_hanging_tool_times_out_and_the_executor_stays_usable(tmp_path: Path) -> None:
    @tool
    async def stuck(order: str) -> str:
        """Never answers."""
        await asyncio.Event().wait()
        return order

    @tool("class")
    def klass(name: str) -> str:
        """A tool whose name is a Python keyword."""
        return f"class {name}"

    cell = (
        "from agent_tools import class_, stuck\nfrom ipybox_core.errors import ToolTimeoutError\n"
        "try:\n    stuck(order='Z')\nexcept ToolTimeoutError as e:\n    print('timeout:', e)\n"
        "print(class_(name='A'))"
    )
    hitl = HumanInTheLoopMiddleware(interrupt_on={})
    audit = tmp_path / "audit.jsonl"
    async with CodeExecutor(workspace=tmp_path / "ws", call_timeout=1, audit_log=audit) as ex:
        model, agent = agent_of([stuck, klass], [CodeActionMiddleware(ex, agent_tools=False)], "print(1)")
        await run_to_end(agent, "none")
        assert ex.host_tools == [] and "agent_tools" not in model.calls[0][0].text  # opted out

        code = CodeActionMiddleware(ex, human_in_the_loop=hitl)
        _, agent = agent_of([stuck, klass], [hitl, code], cell)
        await run_to_end(agent, "hang")
        text = await result_text(agent, "hang")
        assert "timeout: host tool 'stuck' did not finish within 1 s" in text, text
        assert text.splitlines()[-1] == "class A"
        assert (await ex.execute("print(40 + 2)")).text.strip() == "42"
    records = [json.loads(line) for line in audit.read_text().splitlines()]
    decided = [(r["server"], r["tool"], r["decided_by"]) for r in records if "decided_by" in r]
    assert decided == [
        ("agent_tools", "stuck", "tool:no-approval"),
        ("agent_tools", "class", "tool:no-approval"),
    ]


async def test_the_example_runs() -> None:
    out = (await asyncio.to_thread(run_example, "langchain_own_tools.py", "--offline", "--yes")).stdout
    lines = [
        "approval needed: agent_tools.refund {'order_id': 'ord-1', 'amount_usd': 30}",
        "approval needed: agent_tools.refund {'order_id': 'ord-3', 'amount_usd': 8.5}",
        "refunded 30.00 USD for ord-1 (27.60 EUR)",
        "refunded 8.50 USD for ord-3 (7.82 EUR)",
        "skipped: order_status failed: no order ord-9",
    ]
    for line in lines:
        assert line in out, out
    documented("frameworks/langchain.md", *lines)


async def test_without_a_checkpointer_the_approval_callback_gets_the_gated_calls(
    executor: CodeExecutor,
) -> None:
    refunded: list[str] = []
    asked: list[str] = []

    async def approve(request: HITLRequest) -> HITLResponse:
        action = request["action_requests"][0]
        asked.append(f"{action['name']} {action['args']}")
        return {"decisions": [{"type": "approve"}]}

    hitl = HumanInTheLoopMiddleware(interrupt_on={"refund": {"allowed_decisions": ["approve", "reject"]}})
    code = CodeActionMiddleware(executor, human_in_the_loop=hitl, approval_callback=approve)
    model = ScriptedChatModel(script=run_code_then_finish(CELL))
    agent = create_agent(model, tools=clerk_tools(refunded), middleware=[hitl, code], context_schema=dict)
    out = await agent.ainvoke({"messages": [{"role": "user", "content": "go"}]}, context=CONTEXT)
    assert asked == [
        "agent_tools.refund {'order': 'A-1'}",
        "agent_tools.refund {'order': 'A-2'}",
        "test.add {'a': 20, 'b': 22}",
    ]
    assert "refunded A-2" in text_of(tool_messages(out)[0]) and refunded == ["A-1", "A-2"]


async def test_a_json_schema_tool_with_an_artifact_gives_its_structured_content(
    executor: CodeExecutor,
) -> None:
    async def search(query: str, limit: int = 2) -> tuple[list[dict[str, str]], dict[str, Any]]:
        hits = [f"{query}-{n}" for n in range(limit)]
        return [{"type": "text", "text": ", ".join(hits)}], {"structured_content": {"hits": hits}}

    schema = {
        "type": "object",
        "properties": {"query": {"type": "string"}, "limit": {"type": "integer", "default": 2}},
        "required": ["query"],
    }
    # the shape of a langchain-mcp-adapters tool: a JSON schema, content and an artifact
    mcp_like = StructuredTool(
        name="search",
        description="Search the catalogue.",
        args_schema=schema,
        coroutine=search,
        response_format="content_and_artifact",
    )
    hitl = HumanInTheLoopMiddleware(interrupt_on={})
    code = CodeActionMiddleware(executor, human_in_the_loop=hitl)
    cell = "from agent_tools import search\nprint(search(query='lamp', limit=3)['hits'])"
    model, agent = agent_of([mcp_like], [hitl, code], cell)
    await run_to_end(agent, "json-schema")
    assert (await result_text(agent, "json-schema")).strip() == "['lamp-0', 'lamp-1', 'lamp-2']"
    assert "def search(*, query: str, limit: int = 2) -> Any:" in model.calls[0][0].text


async def test_each_sessions_thread_runs_the_tools_in_its_own_context(tmp_path: Path) -> None:
    hitl = HumanInTheLoopMiddleware(interrupt_on={})
    async with Sessions(root=tmp_path, warm=0) as sessions:
        code = CodeActionMiddleware(sessions, human_in_the_loop=hitl)
        model = ScriptedChatModel(
            script=run_code_then_finish("from agent_tools import whoami\nprint(whoami()['user'])")
        )
        agent: Any = create_agent(
            model,
            tools=clerk_tools([]),
            middleware=[hitl, code],
            checkpointer=InMemorySaver(),
            context_schema=dict,
        )
        for user in ("ann", "bob"):
            await agent.ainvoke(
                {"messages": [{"role": "user", "content": "go"}]},
                config(user),
                context={"user": user},
                version="v2",
            )
            assert (await result_text(agent, user)).strip() == user
        assert len(sessions.keys()) == 2


async def test_the_apps_own_host_tools_stay_and_two_agents_each_get_theirs_back(
    executor: CodeExecutor,
) -> None:
    async def ping(call: HostCall) -> str:
        return "pong"

    await executor.register_host_tools([HostTool("ping", ping, "The application's own tool.")])

    @tool
    def shout(text: str) -> str:
        """Shout."""
        return text.upper()

    hitl = HumanInTheLoopMiddleware(interrupt_on={})
    clerk_cell = "from agent_tools import ping, whoami\nprint(ping(), whoami()['user'])"
    _, clerk = agent_of(
        clerk_tools([]), [hitl, CodeActionMiddleware(executor, human_in_the_loop=hitl)], clerk_cell
    )
    shouter_cell = "import agent_tools\nfrom agent_tools import ping, shout\nprint(ping(), shout(text='hi'), hasattr(agent_tools, 'whoami'))"
    _, shouter = agent_of(
        [shout], [hitl, CodeActionMiddleware(executor, human_in_the_loop=hitl)], shouter_cell
    )

    for agent, thread, expected in (
        (clerk, "two-1", "pong carol"),
        (shouter, "two-2", "pong HI False"),
        (clerk, "two-3", "pong carol"),  # its tools are put back
    ):
        await run_to_end(agent, thread)
        assert (await result_text(agent, thread)).strip() == expected
    assert [tool.name for tool in executor.host_tools] == ["ping", "refund", "whoami", "lookup"]


async def test_a_policy_that_lets_a_gated_tool_through_is_warned_about(
    executor: CodeExecutor, caplog: pytest.LogCaptureFixture
) -> None:
    refunded: list[str] = []
    hitl = HumanInTheLoopMiddleware(interrupt_on={"refund": True, "lookup": True})
    code = CodeActionMiddleware(executor, human_in_the_loop=hitl)
    _, agent = agent_of(
        clerk_tools(refunded), [hitl, code], "from agent_tools import refund\nprint(refund(order='R-1'))"
    )
    executor.approval = ApprovalRules(allow=["agent_tools.refund"])
    try:
        with caplog.at_level(logging.WARNING, logger="ipybox_integrations.langchain._agent_tools"):
            _, asked = await run_to_end(agent, "policy-allows")
    finally:
        executor.approval = "always"
    assert asked == [] and refunded == ["R-1"]  # the executor's policy comes first, as for MCP calls
    (warning,) = [r.getMessage() for r in caplog.records if "interrupt_on" in r.getMessage()]
    assert "refund (policy:allow agent_tools.refund)" in warning and "lookup" not in warning


async def test_an_agent_tools_run_is_a_child_of_execute_code(executor: CodeExecutor) -> None:
    runs = ToolRuns()
    hitl = HumanInTheLoopMiddleware(interrupt_on={"refund": True})
    code = CodeActionMiddleware(executor, human_in_the_loop=hitl)
    cell = "from agent_tools import refund, whoami\nprint(whoami()['user'], refund(order='T-1'))"
    _, agent = agent_of(clerk_tools([]), [hitl, code], cell)
    settings = {**config("traced-tools"), "callbacks": [runs]}
    turn = {"messages": [{"role": "user", "content": "go"}]}
    await agent.ainvoke(turn, settings, context=CONTEXT, version="v2")
    await agent.ainvoke(
        Command(resume={"decisions": [{"type": "approve"}]}), settings, context=CONTEXT, version="v2"
    )

    (whoami,) = runs.named("whoami")
    (refund,) = runs.named("refund")
    assert refund["output"].content == "refunded T-1"
    assert runs.named("agent_tools.refund") == []  # the tool's own run, not a second one for the call
    assert runs.runs[whoami["parent"]]["name"] == "execute_code"
    assert runs.runs[refund["parent"]]["name"] == "execute_code"
