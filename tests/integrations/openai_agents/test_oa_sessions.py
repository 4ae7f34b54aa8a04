"""CodeActionTool over Sessions: a kernel per conversation key, moving on, restart notices."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from agents import Runner, RunResult
from agents.testing import ModelCall, ModelStep, ScriptedModel, assistant_message, function_call
from oa_kit import make_agent, output_text, run_to_end, scripted, tool_outputs

from ipybox_core import CodeExecutor
from ipybox_core.sessions import Sessions
from ipybox_integrations._session import ABANDONED_MESSAGE, BUSY_MESSAGE
from ipybox_integrations.openai_agents import CodeActionTool
from servers import PYTHON, SERVE_SCRIPT

pytestmark = pytest.mark.asyncio(loop_scope="package")

SERVERS = {"test": {"command": PYTHON, "args": [str(SERVE_SCRIPT), "stdio"]}}
COUNT_THEN_MARK = "from mcptools.test import count\nprint('count', count())\nmarked = True"


@pytest_asyncio.fixture(loop_scope="package")
async def sessions(tmp_path: Path) -> AsyncIterator[Sessions]:
    async with Sessions(root=tmp_path, warm=0, mcp_servers=SERVERS) as made:
        yield made


def per_user(sessions: Sessions) -> CodeActionTool:
    return CodeActionTool(sessions, key=lambda ctx: ctx.context["user"])


async def run(code: CodeActionTool, model: ScriptedModel, user: str, **kwargs: Any) -> RunResult:
    return await Runner.run(make_agent(code, model), "go", context={"user": user}, **kwargs)


async def server_count(executor: CodeExecutor) -> int:
    """The test server's counter after one more call (each call increments it)."""
    result = await executor.execute("from mcptools.test import count\nprint(count())", approve_all=True)
    return int(result.text.strip())


async def test_two_conversations_in_parallel_have_their_own_kernels(sessions: Sessions) -> None:
    code = per_user(sessions)

    async def conversation(user: str) -> str:
        model = scripted(f"mine = {user!r}", "print(mine)")
        await run(code, model, user)
        return output_text(tool_outputs(model)[-1])

    assert list(await asyncio.gather(conversation("alice"), conversation("bob"))) == ["alice", "bob"]
    assert sorted(sessions.keys()) == ["alice", "bob"]


async def test_first_turns_of_two_users_on_one_agent_at_once_keep_both_kernels(
    sessions: Sessions, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One agent, two users' first turns together: the agent's tools are registered once, and the
    hidden kernel agent's tools are not rebuilt under the other run (the SDK refuses that with
    "Agent.tools changed while concurrent runs were using the same Agent")."""
    register = sessions.register_host_tools

    async def slow_register(*args: Any, **kwargs: Any) -> Any:
        await asyncio.sleep(0.3)  # both first turns are inside the registration at once
        return await register(*args, **kwargs)

    monkeypatch.setattr(sessions, "register_host_tools", slow_register)
    code = per_user(sessions)
    agent = make_agent(code, ScriptedModel([]))
    calls = iter(range(1000))

    class Echoes(ScriptedModel):
        async def get_response(self, *args: Any, **kwargs: Any) -> Any:
            self.enqueue(ModelStep.respond(self.reply))
            return await super().get_response(*args, **kwargs)

        @staticmethod
        def reply(call: ModelCall) -> list[Any]:
            last = call.input[-1]
            if last.get("type") == "function_call_output":
                return [assistant_message(output_text(last["output"]))]
            return [function_call("execute_code", {"code": last["content"]}, call_id=f"c{next(calls)}")]

    agent.model = Echoes([])

    async def turn(user: str, text: str) -> str:
        return str((await Runner.run(agent, text, context={"user": user})).final_output)

    slow = "import asyncio\nawait asyncio.sleep(1)\nmine = "  # each run still going while the other starts
    await asyncio.gather(turn("alice", slow + "'alice'"), turn("bob", slow + "'bob'"))
    assert [await turn("alice", "print(mine)"), await turn("bob", "print(mine)")] == ["alice", "bob"]


async def test_a_pending_approval_does_not_make_another_conversation_busy(sessions: Sessions) -> None:
    code = per_user(sessions)
    waiting_model = scripted("from mcptools.test import echo\nprint(echo(message='later'))")
    waiting = await run(code, waiting_model, "alice")
    assert [item.tool_name for item in waiting.interruptions] == ["echo"]

    other = scripted("print('bob runs')")
    await run(code, other, "bob")
    assert tool_outputs(other) == ["bob runs"]

    state = waiting.to_state()
    state.approve(waiting.interruptions[0])
    await Runner.run(make_agent(code, waiting_model), state)
    assert tool_outputs(waiting_model) == ["later"]
    assert code.suspended == 0


async def test_reused_call_ids_across_conversations_do_not_cross(sessions: Sessions) -> None:
    code = per_user(sessions)
    alice_model = scripted("from mcptools.test import echo\nprint(echo(message='alice'))")
    bob_model = scripted("from mcptools.test import echo\nprint(echo(message='bob'))")
    alice = await run(code, alice_model, "alice")  # both execute_code calls are "outer-1"
    bob = await run(code, bob_model, "bob")
    assert code.suspended == 2

    state = bob.to_state()
    state.approve(bob.interruptions[0])
    await Runner.run(make_agent(code, bob_model), state)
    assert tool_outputs(bob_model) == ["bob"]
    assert code.suspended == 1  # alice still waits: bob's run moved nothing of hers on

    state = alice.to_state()
    state.approve(alice.interruptions[0])
    await Runner.run(make_agent(code, alice_model), state)
    assert tool_outputs(alice_model) == ["alice"]


async def test_moving_on_cancels_the_parked_execution_at_once(sessions: Sessions) -> None:
    code = per_user(sessions)
    executor = (await sessions.session("alice")).executor
    before = await server_count(executor)
    first = scripted(COUNT_THEN_MARK)
    waiting = await run(code, first, "alice")
    assert waiting.interruptions and executor.busy

    seen_busy: list[bool] = []

    def first_turn(call: ModelCall) -> list[Any]:
        seen_busy.append(executor.busy)
        return [function_call("execute_code", {"code": "print('marked' in globals())"}, call_id="outer-1")]

    model = ScriptedModel([ModelStep.respond(first_turn), [assistant_message("done")]])
    await run(code, model, "alice")  # a fresh run, not the waiting state: the conversation moves on

    assert seen_busy == [False]  # cancelled before the model's first call
    assert ABANDONED_MESSAGE in (model.calls[0].system_instructions or "")
    assert tool_outputs(model) == [f"{ABANDONED_MESSAGE}\n\nFalse"]
    assert code.suspended == 0 and not executor.busy
    assert await server_count(executor) == before + 1  # count() never ran for the agent

    state = waiting.to_state()  # the abandoned state resumes as lost
    state.approve(waiting.interruptions[0])
    await Runner.run(make_agent(code, first), state)
    assert "no longer waits for an approval" in output_text(tool_outputs(first)[0])
    assert await server_count(executor) == before + 2


async def test_moving_on_in_one_conversation_leaves_another_waiting(sessions: Sessions) -> None:
    code = per_user(sessions)
    await run(code, scripted(COUNT_THEN_MARK), "alice")
    await run(code, scripted(COUNT_THEN_MARK), "bob")

    await run(code, ScriptedModel([[assistant_message("hi")]]), "bob")

    assert code.suspended == 1
    assert (await sessions.session("alice")).executor.busy
    assert not (await sessions.session("bob")).executor.busy
    assert await code.cancel_suspended() == 1


async def test_moving_on_with_one_shared_executor(idle_executor: CodeExecutor) -> None:
    code = CodeActionTool(idle_executor)  # no key: every run is the default conversation
    await Runner.run(make_agent(code, scripted(COUNT_THEN_MARK)), "go")
    assert idle_executor.busy

    model = scripted("print('fresh')")
    await run_to_end(make_agent(code, model))
    assert tool_outputs(model) == [f"{ABANDONED_MESSAGE}\n\nfresh"]
    assert BUSY_MESSAGE not in tool_outputs(model)[0]


async def test_restart_notice_after_the_session_was_closed(sessions: Sessions) -> None:
    code = per_user(sessions)
    await run(code, scripted("kept = 1"), "alice")
    await sessions.close_session("alice")

    model = scripted("print('kept' in globals())")
    await run(code, model, "alice")
    [output] = tool_outputs(model)
    notice, _, text = output_text(output).rpartition("\n\n")
    assert "closed by the application" in notice
    assert text == "False"

    again = scripted("print('once')")
    await run(code, again, "alice")
    assert tool_outputs(again) == ["once"]  # told once


async def test_restart_notice_waits_for_a_call_that_parks(sessions: Sessions) -> None:
    code = per_user(sessions)
    await run(code, scripted("kept = 1"), "alice")
    await sessions.close_session("alice")

    model = scripted("from mcptools.test import echo\nprint(echo(message='after restart'))")
    _, seen = await run_to_end(make_agent(code, model), context={"user": "alice"})
    assert [item.tool_name for item in seen] == ["echo"]  # the call parked before the notice was read
    [output] = tool_outputs(model)
    assert "closed by the application" in output_text(output)
    assert output_text(output).endswith("\n\nafter restart")
