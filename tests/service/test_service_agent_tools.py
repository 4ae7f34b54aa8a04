"""The application's own tools called from the code over ``ipybox serve`` (issue 24): each call runs
in the application process that holds the execution at that moment, once (real processes)."""

from __future__ import annotations

import asyncio
import json
import signal
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from service_kit import TOKEN, Service, run_app, start_app, wait_for_line

from ipybox_core.approval import ApprovalRequest
from ipybox_core.errors import ExecutorBusy
from ipybox_core.executor import Execution, ExecutionResult
from ipybox_core.hosttools import HostCall, HostTool
from ipybox_core.remote import RemoteSessions
from ipybox_core.remote._connection import ServiceConnection
from servers.agent_tools_cells import CALLS_CELL

ORDER = {"type": "object", "properties": {"order": {"type": "string"}}, "required": ["order"]}


def lines(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


async def run_accepting(execution: Execution) -> ExecutionResult:
    """Run ``execution`` to its end, accepting every call."""
    async for event in execution:
        if isinstance(event, ApprovalRequest):
            await event.accept()
        elif isinstance(event, ExecutionResult):
            return event
    raise AssertionError("no result")


def two_workers(
    tmp_path: Path, service: Service, app: str, roles: tuple[str, str]
) -> tuple[str, list[list[str]]]:
    """Process A runs ``app``'s first role until the code's first ``refund`` waits for approval;
    process B runs its second role and approves everything. B's output, and who ran what."""
    state, log = tmp_path / "state", tmp_path / "ran.log"
    started = run_app(app, roles[0], service.url, str(state), str(log))
    assert started.returncode == 0 and started.stdout.strip(), started.stderr
    answered = run_app(app, roles[1], service.url, str(state), str(log))
    assert answered.returncode == 0, answered.stderr
    output = json.loads(next(x for x in answered.stdout.splitlines() if x.startswith("OUTPUT "))[7:])
    return str(output), [line.rsplit(" ", 1) for line in lines(log)]


@pytest.mark.parametrize(
    ("app", "roles"),
    [
        ("pai_tools_app.py", ("start", "answer")),  # DeferredToolRequests saved as JSON
        ("lc_tools_app.py", ("start", "resume")),  # a SQLite checkpointer
        ("oa_tools_app.py", ("start", "answer")),  # a RunState saved as JSON
    ],
    ids=["pydantic-ai", "langchain", "openai-agents"],
)
def test_each_agent_tool_runs_once_in_the_process_that_holds_the_execution(
    tmp_path: Path, service: Service, app: str, roles: tuple[str, str]
) -> None:
    """Process A's run calls ``whoami`` and ``lookup`` (no approval) and stops at ``refund``;
    process B approves: both refunds run in B, once each; ``whoami`` and ``lookup`` ran once, in A."""
    output, ran = two_workers(tmp_path, service, app, roles)
    assert [what for what, _ in ran] == ["whoami carol", "lookup X-9", "refund A-1", "refund A-2"]
    in_a, in_b = {pid for _, pid in ran[:2]}, {pid for _, pid in ran[2:]}
    assert len(in_a) == len(in_b) == 1 and in_a != in_b  # A's tools in A, the refunds in B
    assert output.splitlines()[0].endswith("{'user': 'carol'}")  # A's run context in A's call
    assert output.splitlines()[1].startswith("error: ")  # the framework's error, as ToolError
    assert "refunded A-1\nrefunded A-2\n42" in output  # and the MCP call after them


def test_results_errors_and_a_hang_reach_the_code_and_the_session_stays_usable(
    service: Service, conversation: str
) -> None:
    contexts: list[Any] = []

    async def lookup(call: HostCall) -> dict[str, Any]:
        contexts.append(call.context)
        return {"order": call.arguments["order"], "lines": [1, 2], "who": call.context}

    async def broken(call: HostCall) -> None:
        raise ValueError("the order system is down")

    async def hangs(call: HostCall) -> None:
        await asyncio.Event().wait()

    code = """
from agent_tools import lookup, broken, hangs
from ipybox_core.errors import ToolError, ToolTimeoutError
print(lookup(order="A-1"))
try:
    broken()
except ToolError as error:
    print("ToolError:", error)
try:
    hangs()
except ToolTimeoutError as error:
    print("ToolTimeoutError:", error)
"""

    async def main() -> tuple[str, str, str]:
        async with RemoteSessions(service.url, token=TOKEN) as sessions:
            await sessions.register_host_tools(
                [
                    HostTool("lookup", lookup, "Look an order up.", ORDER),
                    HostTool("broken", broken, "Fails."),
                    HostTool("hangs", hangs, "Never answers.", timeout=1.0),
                ]
            )
            session = await sessions.session(conversation)
            session.executor.bind_tool_context("run-7")
            first = await run_accepting(session.executor.stream(code))
            after = await run_accepting(session.executor.stream("print(lookup(order='A-2')['order'])"))
            return first.text, after.text, sessions.api_reference()

    text, after, reference = asyncio.run(main())
    assert "{'order': 'A-1', 'lines': [1, 2], 'who': 'run-7'}" in text  # structure and context kept
    assert "ToolError: the order system is down" in text
    assert "ToolTimeoutError: host tool 'hangs' did not finish within 1 s" in text
    assert after.strip() == "A-2" and contexts == ["run-7", "run-7"]  # usable after the hang
    assert "from agent_tools import" in reference and "def lookup(*, order: str)" in reference
    assert reference.count("# MCP tools as Python functions") == 1  # the service's part and the agent tools'


def test_a_call_handed_to_one_process_never_runs_in_another_that_reattaches(
    service: Service, conversation: str
) -> None:
    ran: list[str] = []
    release = asyncio.Event()

    def tool(client: str, started: asyncio.Event | None = None) -> HostTool:
        async def refund(call: HostCall) -> str:
            ran.append(client)
            if started is not None:
                started.set()
            await release.wait()
            return f"refunded by {client}"

        return HostTool("refund", refund, "Refund an order.", ORDER)

    async def main() -> tuple[str, str]:
        started = asyncio.Event()
        async with (
            RemoteSessions(service.url, token=TOKEN, client_name="worker-a") as a,
            RemoteSessions(service.url, token=TOKEN, client_name="worker-b") as b,
        ):
            await a.register_host_tools([tool("a", started)])
            await b.register_host_tools([tool("b")])
            code = "from agent_tools import refund\nprint(refund(order='A-1'))"
            held = (await a.session(conversation)).executor.stream(code, call_id="refund-call")
            running = asyncio.ensure_future(run_accepting(held))
            await started.wait()  # A runs the call now
            again = await (await b.session(conversation)).executor.reattach("refund-call")
            assert again is not None
            with pytest.raises(ExecutorBusy) as busy:
                await run_accepting(again)
            release.set()
            return (await running).text, str(busy.value)

    text, busy = asyncio.run(main())
    assert ran == ["a"] and "refunded by a" in text
    assert "runs in another application process (worker-a)" in busy


def test_a_process_killed_while_it_runs_a_call_leaves_a_timeout_never_a_second_run(
    tmp_path: Path, service: Service, conversation: str
) -> None:
    log = tmp_path / "ran.log"
    taker = start_app("host_tool_app.py", "take", service.url, str(log))
    wait_for_line(taker, "RUNNING")
    taker.send_signal(signal.SIGKILL)
    taker.wait()

    async def other_worker() -> str:
        async def slow(call: HostCall) -> str:
            log.open("a").write("slow again\n")
            return "ran twice"

        async with RemoteSessions(service.url, token=TOKEN, client_name="worker-b") as sessions:
            await sessions.register_host_tools([HostTool("slow", slow, "Takes its time.", timeout=2.0)])
            executor = (await sessions.session(conversation)).executor
            deadline = time.monotonic() + 60
            while True:  # the call runs in the killed process until its timeout says otherwise
                again = await executor.reattach("held")
                assert again is not None
                try:
                    return (await run_accepting(again)).text
                except ExecutorBusy:
                    assert time.monotonic() < deadline
                    await asyncio.sleep(0.5)

    text = asyncio.run(other_worker())
    assert "ToolTimeoutError: agent tool 'slow' did not answer within 2 s" in text
    assert "(taker)" in text and "it may have run" in text
    assert len(lines(log)) == 1 and lines(log)[0].startswith("slow ")  # it ran once, in the taker


def test_agent_tool_definitions_that_are_not_get_a_clear_error(service: Service, conversation: str) -> None:
    async def main() -> str:
        connection = ServiceConnection(service.url, token=TOKEN, client_name="raw")
        await connection.open()
        try:
            reply = await connection.execute(
                f"named:{conversation}",
                arguments={"code": "print(1)"},
                host_tools=[{"name": ""}, {"name": "ok", "timeout": -1}],  # type: ignore[list-item]
            )
        finally:
            await connection.aclose()
        return "\n".join(getattr(block, "text", "") for block in reply.content)  # type: ignore[union-attr]

    text = asyncio.run(main())
    assert text.startswith("Error: the client's agent tools are invalid: tool 0: name must be a string")
    assert "tool 1: timeout of 'ok' must be a positive number of seconds" in text


def framework_modules(name: str) -> None:
    """Put ``tests/integrations/<name>`` (its kit and its agent-tools tests) on the import path."""
    folder = str(Path(__file__).parents[1] / "integrations" / name)
    if folder not in sys.path:
        sys.path.insert(0, folder)


def test_langchain_agent_tools_over_the_service_interrupt_as_interrupt_on_says(
    service: Service, conversation: str
) -> None:
    framework_modules("langchain")
    from langchain.agents.middleware import HumanInTheLoopMiddleware
    from test_langchain_host_tools import action_names, agent_of, clerk_tools, result_text, run_to_end

    from ipybox_integrations.langchain import CodeActionMiddleware

    async def main() -> tuple[list[Any], str, list[str]]:
        refunded: list[str] = []
        async with RemoteSessions(service.url, token=TOKEN) as sessions:
            hitl = HumanInTheLoopMiddleware(interrupt_on={"refund": True})
            code = CodeActionMiddleware(sessions, human_in_the_loop=hitl)
            _, agent = agent_of(clerk_tools(refunded), [hitl, code], CALLS_CELL)
            _, asked = await run_to_end(agent, conversation)
            return action_names(asked), await result_text(agent, conversation), refunded

    asked, text, refunded = asyncio.run(main())
    assert asked == [
        ("agent_tools.refund", {"order": "A-1"}),
        ("agent_tools.refund", {"order": "A-2"}),
        ("test.add", {"a": 20, "b": 22}),
    ]
    assert refunded == ["A-1", "A-2"]
    assert text.splitlines()[0] == "{'user': 'carol', 'messages': 2}"  # ToolRuntime context and state
    assert "error: no order X-9" in text and text.splitlines()[-1] == "42"


def test_openai_agents_function_tools_over_the_service_need_approval_as_they_say(
    service: Service, conversation: str
) -> None:
    framework_modules("openai_agents")
    from oa_kit import call_summary, output_text, run_to_end, scripted, tool_outputs
    from test_oa_host_tools import clerk, clerk_tools

    from ipybox_integrations.openai_agents import CodeActionTool

    async def main() -> tuple[list[Any], str, list[str]]:
        refunded: list[str] = []
        async with RemoteSessions(service.url, token=TOKEN) as sessions:
            code = CodeActionTool(sessions, key=lambda ctx: conversation)
            model = scripted(CALLS_CELL)
            _, seen = await run_to_end(clerk(code, model, clerk_tools(refunded)), context={"user": "carol"})
            return call_summary(seen), output_text(tool_outputs(model)[0]), refunded

    asked, text, refunded = asyncio.run(main())
    assert asked == [
        ("agent_tools", "refund", {"order": "A-1"}),
        ("agent_tools", "refund", {"order": "A-2"}),
        ("test", "add", {"a": 20, "b": 22}),
    ]
    assert refunded == ["A-1", "A-2"]
    assert text.splitlines()[0] == "{'user': 'carol'}"  # RunContextWrapper's context
    assert text.splitlines()[-1] == "42"


def test_cancelling_an_execution_while_its_agent_tool_runs_frees_the_kernel_at_once(
    service: Service, conversation: str
) -> None:
    async def main() -> str:
        started = asyncio.Event()

        async def stuck(call: HostCall) -> None:
            started.set()
            await asyncio.Event().wait()

        async with RemoteSessions(service.url, token=TOKEN) as sessions:
            await sessions.register_host_tools([HostTool("stuck", stuck, "Never answers.", timeout=600)])
            executor = (await sessions.session(conversation)).executor
            held = executor.stream("from agent_tools import stuck\nstuck()")
            running = asyncio.ensure_future(run_accepting(held))
            await started.wait()
            await held.cancel()
            running.cancel()
            return (await run_accepting(executor.stream("print('free')"))).text

    assert asyncio.run(main()).strip() == "free"  # not "busy" for the tool's 600 s
