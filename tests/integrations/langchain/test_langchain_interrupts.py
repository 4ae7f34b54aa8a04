"""execute_code in create_agent: one LangGraph interrupt per MCP call, real kernel and MCP server."""

from __future__ import annotations

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from lc_kit import (
    APPROVE,
    action,
    config,
    make_agent,
    only_interrupt,
    reject,
    resume,
    run_code_then_finish,
    text_of,
    tool_messages,
    user,
)

from ipybox_core import CodeExecutor
from ipybox_integrations.langchain import CodeActionMiddleware
from ipybox_integrations.langchain._hitl import EDIT_NOTICE

pytestmark = pytest.mark.asyncio(loop_scope="package")

THREE_CALLS = """\
from mcptools.test import add, echo
runs_three = globals().get("runs_three", 0) + 1
first = add(a=1, b=2)
try:
    second = echo(message="hello")
except PermissionError as rejected:
    second = f"rejected: {rejected}"
third = add(a=first, b=10)
print(first, second, third, "runs:", runs_three)
"""


async def test_three_interrupts_in_one_execution_are_resumed_one_by_one(idle_executor: CodeExecutor) -> None:
    _, agent = make_agent([CodeActionMiddleware(idle_executor)], run_code_then_finish(THREE_CALLS))
    out = await agent.ainvoke(user(), config("three"), version="v2")
    seen = []
    for answer in (APPROVE, reject("not this one"), APPROVE):
        interrupt = only_interrupt(out)
        seen.append((interrupt.id, action(interrupt)))
        assert interrupt.value["review_configs"] == [
            {"action_name": action(interrupt)["name"], "allowed_decisions": ["approve", "reject"]}
        ]
        assert interrupt.response_schema is not None
        out = await resume(agent, "three", answer)

    assert not out.interrupts
    assert [(a["name"], a["args"]) for _, a in seen] == [
        ("test.add", {"a": 1, "b": 2}),
        ("test.echo", {"message": "hello"}),
        ("test.add", {"a": 3, "b": 10}),
    ]
    assert len({interrupt_id for interrupt_id, _ in seen}) == 3
    assert all("test.add" in a["description"] or "test.echo" in a["description"] for _, a in seen)
    (message,) = tool_messages(out.value)
    assert message.status == "success"
    assert text_of(message) == "3 rejected: test.echo was rejected: not this one 13 runs: 1"
    assert out.value["messages"][-1].content == "done"
    # the code ran once, although LangGraph entered the tool four times
    assert (await idle_executor.execute("print(runs_three)")).text.strip() == "1"


async def test_edit_changes_the_arguments_and_a_malformed_answer_can_be_given_again(
    idle_executor: CodeExecutor,
) -> None:
    middleware = CodeActionMiddleware(idle_executor, allowed_decisions=["approve", "edit", "reject"])
    code = "from mcptools.test import add\nprint('sum', add(a=1, b=2))"
    _, agent = make_agent([middleware], run_code_then_finish(code))
    result = await agent.ainvoke(user(), config("edit"))  # the default output format
    (interrupt,) = result["__interrupt__"]
    assert interrupt.value["review_configs"][0]["allowed_decisions"] == ["approve", "edit", "reject"]

    renamed = {"type": "edit", "edited_action": {"name": "test.echo", "args": {"message": "x"}}}
    for malformed in ({"decisions": [renamed]}, {"decisions": []}, {"type": "approve"}):
        with pytest.raises(ValueError, match="validation error"):  # pydantic ValidationError; nothing saved
            await resume(agent, "edit", malformed)

    edit = {"type": "edit", "edited_action": {"name": "test.add", "args": {"a": 40, "b": 2}}}
    out = await resume(agent, "edit", {"decisions": [edit]})
    assert not out.interrupts
    # The model is told a human changed the call, as HumanInTheLoopMiddleware tells it (was: "sum 42")
    notice = EDIT_NOTICE.format(name="test.add", args='{"a": 40, "b": 2}')
    assert text_of(tool_messages(out.value)[0]) == f"{notice}\n\nsum 42"


async def test_an_edit_the_tools_schema_refuses_is_refused_at_resume_and_can_be_corrected(
    idle_executor: CodeExecutor,
) -> None:
    middleware = CodeActionMiddleware(idle_executor, allowed_decisions=["approve", "edit", "reject"])
    code = "from mcptools.test import add\nprint('sum', add(a=1, b=2))"
    _, agent = make_agent([middleware], run_code_then_finish(code))
    only_interrupt(await agent.ainvoke(user(), config("bad-edit"), version="v2"))

    lots = {"type": "edit", "edited_action": {"name": "test.add", "args": {"a": "lots", "b": 2}}}
    missing = {"type": "edit", "edited_action": {"name": "test.add", "args": {"a": 1}}}
    for invalid, problem in (
        (lots, "a: 'lots' is not of type 'integer'"),
        (missing, "'b' is a required property"),
    ):
        with pytest.raises(ValueError, match=r"do not match test\.add's input schema") as refused:
            await resume(agent, "bad-edit", {"decisions": [invalid]})  # nothing saved, nothing sent
        assert problem in str(refused.value)
    assert idle_executor.busy  # the call still waits for a valid answer

    fixed = {"type": "edit", "edited_action": {"name": "test.add", "args": {"a": 5, "b": 2}}}
    out = await resume(agent, "bad-edit", {"decisions": [fixed]})
    assert not out.interrupts
    assert text_of(tool_messages(out.value)[0]).endswith("sum 7")


async def test_the_reviewer_notice_of_an_edit_outlives_later_questions(idle_executor: CodeExecutor) -> None:
    # The edit is answered in one run, the result comes two runs later: the notice is derived from
    # the answers LangGraph stored, so it reaches the model (with each edit once).
    middleware = CodeActionMiddleware(idle_executor, allowed_decisions=["approve", "edit", "reject"])
    code = "from mcptools.test import add\nprint(add(a=1, b=1), add(a=2, b=2), add(a=3, b=3))"
    _, agent = make_agent([middleware], run_code_then_finish(code))
    only_interrupt(await agent.ainvoke(user(), config("edit-later"), version="v2"))
    edit = {"type": "edit", "edited_action": {"name": "test.add", "args": {"a": 10, "b": 10}}}
    only_interrupt(await resume(agent, "edit-later", {"decisions": [edit]}))
    only_interrupt(await resume(agent, "edit-later", APPROVE))
    out = await resume(agent, "edit-later", APPROVE)
    (message,) = tool_messages(out.value)
    notice = EDIT_NOTICE.format(name="test.add", args='{"a": 10, "b": 10}')
    assert text_of(message) == f"{notice}\n\n20 4 6"


async def test_a_fresh_agent_with_the_same_checkpointer_and_executor_resumes_the_execution(
    idle_executor: CodeExecutor,
) -> None:
    saver = InMemorySaver()
    code = "from mcptools.test import add\nruns_fresh = globals().get('runs_fresh', 0) + 1\nprint(add(a=2, b=3), add(a=3, b=4), runs_fresh)"
    script = run_code_then_finish(code)
    _, first_agent = make_agent([CodeActionMiddleware(idle_executor)], script, checkpointer=saver)
    assert action(only_interrupt(await first_agent.ainvoke(user(), config("fresh"), version="v2")))[
        "args"
    ] == {"a": 2, "b": 3}
    del first_agent

    _, second_agent = make_agent([CodeActionMiddleware(idle_executor)], script, checkpointer=saver)
    out = await resume(second_agent, "fresh", APPROVE)
    assert action(only_interrupt(out))["args"] == {"a": 3, "b": 4}
    _, third_agent = make_agent([CodeActionMiddleware(idle_executor)], script, checkpointer=saver)
    out = await resume(third_agent, "fresh", APPROVE)
    assert text_of(tool_messages(out.value)[0]) == "5 7 1"


async def test_prompt_section_is_appended_to_the_apps_system_prompt(idle_executor: CodeExecutor) -> None:
    model, agent = make_agent(
        [CodeActionMiddleware(idle_executor)],
        run_code_then_finish("x = 1"),
        system_prompt="You are a shop assistant.",
    )
    out = await agent.ainvoke(user(), config("prompt"), version="v2")
    assert not out.interrupts
    system = model.calls[0][0]
    assert system.type == "system"
    assert system.text.startswith("You are a shop assistant.\n\n## Code execution")
    assert "def add(*, a: int, b: int) -> int" in system.text  # the generated API reference
    assert [tool["function"]["name"] for tool in model.bound_tools] == ["execute_code"]
    assert list(model.bound_tools[0]["function"]["parameters"]["properties"]) == ["code"]

    model, agent = make_agent(
        [CodeActionMiddleware(idle_executor, prompt=False)],
        run_code_then_finish("x = 1"),
        system_prompt="Only this.",
    )
    await agent.ainvoke(user(), config("no-prompt"))
    assert model.calls[0][0].text == "Only this."
