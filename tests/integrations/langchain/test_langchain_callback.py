"""Outside a graph (or without a checkpointer): the approval callback; the plain tool in a hand-built graph."""

from __future__ import annotations

from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware.human_in_the_loop import HITLRequest, HITLResponse
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from lc_kit import (
    APPROVE,
    ScriptedChatModel,
    action,
    config,
    only_interrupt,
    reject,
    resume,
    run_code_then_finish,
    text_of,
    tool_call,
    user,
)

from ipybox_core import ApprovalError, CodeExecutor, ConfigError
from ipybox_integrations.langchain import CodeActionMiddleware, execute_code_tool
from ipybox_integrations.langchain._hitl import EDIT_NOTICE

pytestmark = pytest.mark.asyncio(loop_scope="package")

CODE = """\
from mcptools.test import add, echo
try:
    print(echo(message="hi"))
except PermissionError as rejected:
    print("rejected:", rejected)
print(add(a=2, b=2))
"""


class Approver:
    """An approval callback answering from a list and recording the requests."""

    def __init__(self, *answers: Any) -> None:
        self.answers = list(answers)
        self.requests: list[HITLRequest] = []

    async def __call__(self, request: HITLRequest) -> HITLResponse:
        self.requests.append(request)
        answer: HITLResponse = self.answers.pop(0)
        return answer


async def test_callback_decides_each_call_with_the_hitl_shapes(idle_executor: CodeExecutor) -> None:
    approver = Approver(reject("not now"), APPROVE)
    tool = execute_code_tool(idle_executor, approval_callback=approver)
    message = await tool.ainvoke(tool_call(CODE, "direct"))
    assert isinstance(message, ToolMessage) and message.status == "success"
    assert text_of(message) == "rejected: test.echo was rejected: not now\n4"
    first, second = approver.requests
    assert first["action_requests"][0]["name"] == "test.echo"
    assert first["action_requests"][0]["args"] == {"message": "hi"}
    assert "test.echo" in first["action_requests"][0]["description"]
    assert first["review_configs"] == [
        {"action_name": "test.echo", "allowed_decisions": ["approve", "reject"]}
    ]
    assert second["action_requests"][0]["args"] == {"a": 2, "b": 2}
    # invoked with bare arguments (no ToolCall), the tool returns the content blocks
    blocks = await execute_code_tool(idle_executor).ainvoke({"code": "print(6 * 7)"})
    assert [(block["type"], block["text"]) for block in blocks] == [("text", "42")]


async def test_callback_edit(idle_executor: CodeExecutor) -> None:
    edit = {"type": "edit", "edited_action": {"name": "test.add", "args": {"a": 20, "b": 22}}}
    tool = execute_code_tool(
        idle_executor,
        approval_callback=Approver({"decisions": [edit]}),
        allowed_decisions=["approve", "edit"],
    )
    message = await tool.ainvoke(tool_call("from mcptools.test import add\nprint(add(a=1, b=1))"))
    notice = EDIT_NOTICE.format(name="test.add", args='{"a": 20, "b": 22}')
    assert text_of(message) == f"{notice}\n\n42"  # the model is told a human changed the call


async def test_without_checkpointer_or_callback_an_mcp_call_is_a_clear_error(
    idle_executor: CodeExecutor,
) -> None:
    tool = execute_code_tool(idle_executor)
    assert text_of(await tool.ainvoke(tool_call("print('no MCP call, no approval needed')"))) == (
        "no MCP call, no approval needed"
    )
    with pytest.raises(ConfigError, match=r"checkpointer.*approval_callback"):
        await tool.ainvoke(tool_call("from mcptools.test import add\nno_approver_ran = add(a=1, b=1)"))
    assert not idle_executor.busy
    assert (await idle_executor.execute("print('no_approver_ran' in globals())")).text.strip() == "False"


async def test_a_malformed_callback_answer_stops_the_code_with_a_clear_error(
    idle_executor: CodeExecutor,
) -> None:
    tool = execute_code_tool(
        idle_executor, approval_callback=Approver({"decisions": [{"type": "respond", "message": "x"}]})
    )
    with pytest.raises(ApprovalError, match=r"invalid answer to the approval request for test\.add"):
        await tool.ainvoke(tool_call("from mcptools.test import add\nmalformed_ran = add(a=1, b=1)"))
    assert not idle_executor.busy


async def test_create_agent_without_checkpointer_uses_the_callback(idle_executor: CodeExecutor) -> None:
    approver = Approver(APPROVE, APPROVE)
    model = ScriptedChatModel(script=run_code_then_finish(CODE))
    agent = create_agent(model, middleware=[CodeActionMiddleware(idle_executor, approval_callback=approver)])
    result = await agent.ainvoke(user())
    assert "__interrupt__" not in result
    assert next(m for m in result["messages"] if m.type == "tool").content[0]["text"] == "hi\n4"
    assert len(approver.requests) == 2


async def test_plain_tool_in_a_hand_built_graph_interrupts(idle_executor: CodeExecutor) -> None:
    tool = execute_code_tool(idle_executor)
    code = "from mcptools.test import add\nprint(add(a=7, b=8))"

    def model_node(state: MessagesState) -> dict[str, list[BaseMessage]]:
        if state["messages"][-1].type == "tool":
            return {"messages": [AIMessage(content="done")]}
        return {"messages": [AIMessage(content="", tool_calls=[tool_call(code)])]}

    builder = StateGraph(MessagesState)
    builder.add_node("model", model_node)
    builder.add_node("tools", ToolNode([tool]))
    builder.add_edge(START, "model")
    builder.add_conditional_edges("model", tools_condition)
    builder.add_edge("tools", "model")
    builder.add_edge("model", END)
    graph = builder.compile(checkpointer=InMemorySaver())

    out = await graph.ainvoke(user(), config("hand-built"), version="v2")
    request = action(only_interrupt(out))
    assert (request["name"], request["args"]) == ("test.add", {"a": 7, "b": 8})
    out = await resume(graph, "hand-built", APPROVE)
    assert next(m for m in out.value["messages"] if m.type == "tool").content[0]["text"] == "15"


async def test_sync_use_and_bad_settings_fail_clearly(executor: CodeExecutor) -> None:
    with pytest.raises(NotImplementedError, match="async only"):
        execute_code_tool(executor).invoke({"code": "1"})
    for bad in (["respond"], [], "approve"):
        with pytest.raises(ConfigError):
            execute_code_tool(executor, allowed_decisions=bad)  # type: ignore[arg-type]
