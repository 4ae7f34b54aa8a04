"""CodeActionTool in the SDK's own terms: the object is a tool, its interruptions are told apart from
other tools', and a per-conversation source without a conversation key is refused."""

from __future__ import annotations

from pathlib import Path

import pytest
from agents import Agent, FunctionTool, Runner, function_tool
from agents.testing import ScriptedModel, assistant_message, function_call
from oa_kit import call_summary, run_to_end, scripted, tool_outputs

from ipybox_core import CodeExecutor, ConfigError
from ipybox_core.sessions import Sessions
from ipybox_integrations.openai_agents import CodeActionTool

pytestmark = pytest.mark.asyncio(loop_scope="package")


async def test_the_object_is_the_tool(idle_executor: CodeExecutor) -> None:
    """``tools=[CodeActionTool(ex)]`` works as the name says (it was ``Tool execute_code not found``)."""
    code = CodeActionTool(idle_executor)
    assert isinstance(code, FunctionTool) and code.tool is code and code.name == "execute_code"
    model = scripted("from mcptools.test import add\nprint(add(a=20, b=22))")
    agent = Agent(name="analyst", instructions=code.instructions(), tools=[code], model=model)

    result, seen = await run_to_end(agent)

    assert call_summary(seen) == [("test", "add", {"a": 20, "b": 22})]
    assert tool_outputs(model) == ["42"] and result.final_output == "done"
    assert not idle_executor.busy and code.suspended == 0


async def test_describe_claims_only_interruptions_ipybox_made(idle_executor: CodeExecutor) -> None:
    @function_tool(needs_approval=True)
    def refund(order: str) -> str:
        """Refund an order."""
        return f"refunded {order}"

    code = CodeActionTool(idle_executor)
    model = ScriptedModel(
        [
            [
                function_call("refund", {"order": "A-1"}, call_id="native-1"),
                function_call(
                    "execute_code",
                    {"code": "from mcptools.test import echo\nprint(echo(message='hi'))"},
                    call_id="outer-1",
                ),
            ],
            [assistant_message("done")],
        ]
    )
    agent = Agent(name="clerk", instructions=code.instructions(), tools=[code.tool, refund], model=model)

    result = await Runner.run(agent, "go")
    by_tool = {item.tool_name: item for item in result.interruptions}
    assert set(by_tool) == {"refund", "echo"}

    assert not code.owns(by_tool["refund"])
    assert code.describe(by_tool["refund"]) == 'The agent calls the tool refund({"order":"A-1"})'
    assert code.owns(by_tool["echo"])
    assert code.describe(by_tool["echo"]).startswith("The code calls MCP tool test.echo")

    state = result.to_state()
    for item in result.interruptions:
        state.approve(item)
    result = await Runner.run(agent, state)
    assert sorted(tool_outputs(model)) == ["hi", "refunded A-1"]


async def test_sessions_without_a_key_are_refused(tmp_path: Path, idle_executor: CodeExecutor) -> None:
    """Without ``key`` every SDK Session would share one kernel ("dave" reading "carol"'s variable)."""
    async with Sessions(root=tmp_path, warm=0) as sessions:
        with pytest.raises(ConfigError, match="needs key="):
            CodeActionTool(sessions)
        CodeActionTool(sessions, key=lambda ctx: ctx.context["user"])  # a key per conversation
    CodeActionTool(idle_executor)  # one executor: one kernel by choice, no key needed
