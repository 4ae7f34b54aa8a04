"""Each MCP call made inside one execute_code surfaces as a ToolApprovalItem of the outer run."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from agents import Agent, RunConfig, Runner, RunState, ToolApprovalItem
from agents.testing import ScriptedModel, assistant_message, function_call
from oa_kit import call_summary, make_agent, output_text, run_to_end, scripted, tool_outputs

from ipybox_core import ApprovalRequest, CodeExecutor
from ipybox_integrations._session import BUSY_MESSAGE
from ipybox_integrations.openai_agents import CodeActionTool
from servers import PYTHON, RAW_SERVER_SCRIPT

pytestmark = pytest.mark.asyncio(loop_scope="package")

THREE_CALLS = """\
from mcptools.test import add, echo
total = add(a=1, b=2)
total = add(a=total, b=3)
print(echo(message=f"total={total}"))
"""


async def test_three_approvals_in_one_execute_code(idle_executor: CodeExecutor) -> None:
    code = CodeActionTool(idle_executor)
    model = scripted(THREE_CALLS)
    agent = make_agent(code, model)

    result = await Runner.run(agent, "add things up")
    per_run: list[list[ToolApprovalItem]] = []
    while result.interruptions:
        per_run.append(list(result.interruptions))
        state = result.to_state()
        for item in result.interruptions:
            assert code.request_for(item) is not None
            state.approve(item)
        result = await Runner.run(agent, state)

    assert [len(items) for items in per_run] == [1, 1, 1]
    assert call_summary([items[0] for items in per_run]) == [
        ("test", "add", {"a": 1, "b": 2}),
        ("test", "add", {"a": 3, "b": 3}),
        ("test", "echo", {"message": "total=6"}),
    ]
    assert per_run[0][0].qualified_name == "test.add"
    assert result.final_output == "done"
    assert len(model.calls) == 2  # the LLM is not called while the code waits for approvals
    assert tool_outputs(model) == ["total=6"]
    assert not idle_executor.busy and code.suspended == 0
    assert (await idle_executor.execute("total")).text.strip() == "6"  # kernel state persists


async def test_rejection_raises_permission_error_in_the_code(idle_executor: CodeExecutor) -> None:
    code = CodeActionTool(idle_executor)
    model = scripted(
        """\
from mcptools.test import add, echo
for word in ["first", "second"]:
    try:
        echo(message=word)
    except PermissionError as error:
        print("rejected:", error)
print("sum", add(a=20, b=22))
"""
    )

    def decide(state: RunState[Any], item: ToolApprovalItem) -> None:
        arguments = json.loads(item.arguments or "{}")
        if arguments == {"message": "first"}:
            state.reject(item, rejection_message="not today")
        elif arguments == {"message": "second"}:
            state.reject(item)
        else:
            state.approve(item)

    result, seen = await run_to_end(make_agent(code, model), decide=decide)

    assert [item.tool_name for item in seen] == ["echo", "echo", "add"]
    assert tool_outputs(model) == [
        "rejected: test.echo was rejected: not today\n"
        "rejected: test.echo was rejected: Tool execution was not approved.\n"
        "sum 42"
    ]
    assert result.final_output == "done"


async def test_run_state_json_round_trip_between_approvals(idle_executor: CodeExecutor) -> None:
    code = CodeActionTool(idle_executor)
    model = scripted(THREE_CALLS)
    agent = make_agent(code, model)

    result = await Runner.run(agent, "go")
    state = result.to_state()
    state.approve(result.interruptions[0])
    result = await Runner.run(agent, state)
    assert call_summary(result.interruptions) == [("test", "add", {"a": 3, "b": 3})]

    # persist the waiting run as JSON text and restore it with fresh Agent objects (kernel alive)
    stored = json.dumps(result.to_state().to_json())
    restored_agent = make_agent(code, model)
    state = await RunState.from_json(restored_agent, json.loads(stored))
    restored = state.get_interruptions()
    assert call_summary(restored) == [("test", "add", {"a": 3, "b": 3})]
    state.approve(restored[0])
    result = await Runner.run(restored_agent, state)
    assert call_summary(result.interruptions) == [("test", "echo", {"message": "total=6"})]

    stored = result.to_state().to_string()
    state = await RunState.from_string(restored_agent, stored)
    state.approve(state.get_interruptions()[0])
    result = await Runner.run(restored_agent, state)

    assert not result.interruptions
    assert tool_outputs(model) == ["total=6"]


async def test_policy_callable_asks_per_call_with_the_app_context(idle_executor: CodeExecutor) -> None:
    asked: list[tuple[str, str, bool | None]] = []

    def policy(context: Any, request: ApprovalRequest) -> bool:
        asked.append((request.name, type(request).__name__, request.annotations.read_only_hint))
        return request.tool not in context.context["always_allow"]

    code = CodeActionTool(idle_executor, needs_approval=policy)
    model = scripted(
        "from mcptools.test import add, echo\nprint(add(a=1, b=1), add(a=2, b=2), echo(message='hey'))"
    )
    _, seen = await run_to_end(make_agent(code, model), context={"always_allow": {"add"}})

    assert call_summary(seen) == [("test", "echo", {"message": "hey"})]
    assert asked == [
        ("test.add", "ApprovalRequest", True),
        ("test.add", "ApprovalRequest", True),
        ("test.echo", "ApprovalRequest", None),
    ]
    assert tool_outputs(model) == ["2 4 hey"]


async def test_auto_accept_mode_asks_nothing(idle_executor: CodeExecutor) -> None:
    code = CodeActionTool(idle_executor, needs_approval=False)
    model = scripted("from mcptools.test import add\nprint(add(a=5, b=6))")
    _, seen = await run_to_end(make_agent(code, model))
    assert seen == []
    assert tool_outputs(model) == ["11"]


async def test_a_failing_tool_raises_tool_error_and_the_run_goes_on(idle_executor: CodeExecutor) -> None:
    code = CodeActionTool(idle_executor)
    model = scripted(
        "from mcptools.test import fail\n"
        "try:\n    fail(kind='tool_error')\n"
        "except Exception as error:\n    print(type(error).__name__, error)\n"
    )
    result, seen = await run_to_end(make_agent(code, model))
    assert [item.tool_name for item in seen] == ["fail"]
    assert "ToolError" in tool_outputs(model)[0]
    assert "the widget is broken" in tool_outputs(model)[0]
    assert result.final_output == "done"


async def test_a_code_error_is_returned_with_its_traceback(idle_executor: CodeExecutor) -> None:
    code = CodeActionTool(idle_executor)
    model = scripted("1 / 0")
    await run_to_end(make_agent(code, model))
    assert "ZeroDivisionError" in tool_outputs(model)[0]


async def test_parallel_execute_code_is_refused(idle_executor: CodeExecutor) -> None:
    code = CodeActionTool(idle_executor)
    model = ScriptedModel(
        [
            [
                function_call(
                    "execute_code",
                    {"code": "from mcptools.test import add\nprint(add(a=1, b=1))"},
                    call_id="p1",
                ),
                function_call(
                    "execute_code",
                    {"code": "from mcptools.test import add\nprint(add(a=2, b=2))"},
                    call_id="p2",
                ),
            ],
            [assistant_message("done")],
        ]
    )
    result, _ = await run_to_end(make_agent(code, model))
    outputs = sorted(output_text(output) for output in tool_outputs(model))
    assert len(outputs) == 2
    assert BUSY_MESSAGE in outputs
    assert next(o for o in outputs if o != BUSY_MESSAGE) in {"2", "4"}  # whichever started first ran
    assert result.final_output == "done"


async def test_run_config_model_does_not_replace_the_kernel(idle_executor: CodeExecutor) -> None:
    """The outer RunConfig(model=...) must not reach the nested kernel run (it would answer the code)."""
    code = CodeActionTool(idle_executor)
    model = scripted("print(6 * 7)")
    agent = Agent(name="analyst", instructions=code.instructions(), tools=[code.tool])  # no model
    await run_to_end(agent, run_config=RunConfig(model=model))
    assert tool_outputs(model) == ["42"]
    assert len(model.calls) == 2


async def test_abandoned_execution_is_cancelled_and_its_state_resumes_as_lost(
    idle_executor: CodeExecutor,
) -> None:
    code = CodeActionTool(idle_executor, abandon_after=0.5)
    first = scripted("from mcptools.test import echo\nechoed = echo(message='never')\nprint('finished')")
    abandoned = await Runner.run(make_agent(code, first), "go")
    assert [item.tool_name for item in abandoned.interruptions] == ["echo"]
    assert idle_executor.busy

    # nobody comes back: past abandon_after the waiting execution is cancelled by its timer
    for _ in range(100):
        if not idle_executor.busy:
            break
        await asyncio.sleep(0.05)
    assert not idle_executor.busy
    second = scripted("print('fresh')")
    await run_to_end(make_agent(code, second))
    assert tool_outputs(second) == ["fresh"]

    # the abandoned run can still be resumed: the model learns its execution is gone
    state = abandoned.to_state()
    state.approve(abandoned.interruptions[0])
    result = await Runner.run(make_agent(code, first), state)
    assert not result.interruptions
    assert "no longer waits for an approval" in tool_outputs(first)[0]
    assert (await idle_executor.execute("'echoed' in globals()")).text.strip() == "False"


async def test_cancel_ends_waiting_executions(idle_executor: CodeExecutor) -> None:
    code = CodeActionTool(idle_executor)
    model = scripted("from mcptools.test import echo\necho(message='wait')")
    waiting = await Runner.run(make_agent(code, model), "go")
    assert code.suspended == 1 and idle_executor.busy

    assert await code.cancel_suspended() == 1

    assert code.suspended == 0 and not idle_executor.busy
    state = waiting.to_state()
    state.approve(waiting.interruptions[0])
    await Runner.run(make_agent(code, model), state)
    assert "no longer waits for an approval" in tool_outputs(model)[0]


async def test_a_state_restored_in_another_tool_instance_resumes_the_waiting_execution(
    idle_executor: CodeExecutor,
) -> None:
    """Another CodeActionTool around the same executor (an app that builds its tool per request)
    finds the execution waiting in the executor by its call id, and the approval applies."""
    code = CodeActionTool(idle_executor)
    model = scripted("from mcptools.test import echo\necho(message='elsewhere')")
    waiting = await Runner.run(make_agent(code, model), "go")
    stored = waiting.to_state().to_string()

    other = CodeActionTool(idle_executor)
    other_agent = make_agent(other, model)
    state = await RunState.from_string(other_agent, stored)
    state.approve(state.get_interruptions()[0])
    result = await Runner.run(other_agent, state)

    assert result.final_output == "done"
    assert "'elsewhere'" in tool_outputs(model)[0]  # was: the execution "no longer exists"
    assert not idle_executor.busy
    await code.cancel_suspended()  # the first instance's handle of a finished execution: harmless


async def test_a_server_registered_later_with_a_tool_named_like_it(idle_executor: CodeExecutor) -> None:
    code = CodeActionTool(idle_executor)  # created before the server exists
    await idle_executor.register_mcp_server(
        "echo", {"command": PYTHON, "args": [str(RAW_SERVER_SCRIPT), "--clean"]}
    )
    try:
        model = scripted("from mcptools.echo import echo\nprint(echo(text='late'))")
        _, seen = await run_to_end(make_agent(code, model))
        # a namespace named like its tool is reserved by the SDK: the name is qualified instead
        assert [(item.tool_name, item.tool_namespace) for item in seen] == [("echo.echo", None)]
        assert tool_outputs(model) == ["late"]
        assert "mcptools.echo" in (model.calls[0].system_instructions or "")
    finally:
        await idle_executor.unregister_mcp_server("echo")


async def test_resuming_without_a_decision_asks_again(idle_executor: CodeExecutor) -> None:
    code = CodeActionTool(idle_executor)
    model = scripted("from mcptools.test import echo\nprint(echo(message='patience'))")
    agent = make_agent(code, model)
    result = await Runner.run(agent, "go")
    for _ in range(2):
        result = await Runner.run(agent, result.to_state())  # no decision taken
        assert call_summary(result.interruptions) == [("test", "echo", {"message": "patience"})]
        assert idle_executor.busy  # still waiting, not lost
    state = result.to_state()
    state.approve(result.interruptions[0])
    result = await Runner.run(agent, state)
    assert tool_outputs(model) == ["patience"]


async def test_always_approve_covers_the_rest_of_one_execute_code(idle_executor: CodeExecutor) -> None:
    code = CodeActionTool(idle_executor)
    model = scripted(THREE_CALLS, "print(add(a=100, b=1))")

    def decide(state: RunState[Any], item: ToolApprovalItem) -> None:
        state.approve(item, always_approve=item.tool_name == "add")

    _, seen = await run_to_end(make_agent(code, model), decide=decide)
    # the second add of the first block runs unasked; the next execute_code asks again (SDK scope)
    assert call_summary(seen) == [
        ("test", "add", {"a": 1, "b": 2}),
        ("test", "echo", {"message": "total=6"}),
        ("test", "add", {"a": 100, "b": 1}),
    ]
    assert tool_outputs(model) == ["total=6", "101"]
