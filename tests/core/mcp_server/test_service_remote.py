"""RemoteSessions against a real ``ipybox mcp`` HTTP service: decisions from any process."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp_server_kit import TEST_SERVER, HttpIpybox, session_dirs, start_http_ipybox

from ipybox_core.approval import ApprovalRequest
from ipybox_core.errors import ApprovalError, ConfigError, ServiceError
from ipybox_core.executor import Execution, ExecutionResult, OutputChunk
from ipybox_core.remote import RemoteSessions

in_module_loop = pytest.mark.asyncio(loop_scope="module")

COUNT_TWICE = "from mcptools.test import count\nfirst = count()\nprint('count', first, count())"


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpIpybox]:
    workspace = tmp_path_factory.mktemp("service")
    config = workspace.parent / "service-config.json"
    config.write_text(json.dumps({"mcpServers": {"test": TEST_SERVER}}))
    audit = workspace.parent / "service-audit.jsonl"
    server = start_http_ipybox(
        workspace, "--config", str(config), "--approval-timeout", "120", "--audit-log", str(audit)
    )
    yield server
    assert server.stop() == 0


def remote(service: HttpIpybox, name: str = "app-a", token: str | None = None) -> RemoteSessions:
    return RemoteSessions(service.url, token=token or service.token, client_name=name)


@in_module_loop
async def test_code_runs_with_state_and_the_api_reference_comes_from_the_service(service: HttpIpybox) -> None:
    async with remote(service) as sessions:
        assert "def add(" in sessions.api_reference()
        executor = (await sessions.session("state")).executor
        await executor.stream("x = 41").wait()
        result = await executor.stream("print(x + 1)\n1/0").wait()
        assert result.text.strip() == "42"
        assert result.error is not None and result.error.ename == "ZeroDivisionError"


@in_module_loop
async def test_an_approval_is_answered_by_another_process_and_the_call_runs_once(service: HttpIpybox) -> None:
    async with remote(service, "app-a") as first:
        executor = (await first.session("conv/1")).executor
        await executor.stream("before = 'kept'").wait()
        execution = executor.stream(COUNT_TWICE, call_id="call-1")
        stop = await execution.next_stop()
        assert isinstance(stop, ApprovalRequest) and stop.name == "test.count"
        approval_id = stop.id
        # process A goes away without answering (its connection closes)
    async with remote(service, "app-b") as second:
        executor = (await second.session("conv/1")).executor
        assert await executor.reattach("unknown-call") is None
        execution = await executor.reattach("call-1")
        assert execution is not None
        stop = await execution.next_stop()
        assert isinstance(stop, ApprovalRequest) and stop.id == approval_id
        await stop.accept()
        stop = await execution.next_stop()
        assert isinstance(stop, ApprovalRequest) and stop.id != approval_id  # the second count()
        await stop.accept()
        result = await execution.next_stop()
        assert isinstance(result, ExecutionResult)
        first_count, second_count = (int(n) for n in result.text.split()[1:3])
        assert second_count == first_count + 1  # each approved call ran exactly once
        assert (await executor.stream("print(before)").wait()).text.strip() == "kept"
    records = [json.loads(line) for line in (service.workspace.parent / "service-audit.jsonl").open()]
    mine = [record for record in records if record["request_id"] == approval_id]
    assert [(r["tool"], r["approved"], r["decided_by"]) for r in mine] == [("count", True, "client:app-b")]


@in_module_loop
async def test_two_clients_answer_the_same_approval_at_once_and_exactly_one_wins(service: HttpIpybox) -> None:
    async with remote(service, "app-a") as first, remote(service, "app-b") as second:
        starter = (await first.session("race")).executor
        mine = starter.stream("from mcptools.test import add\nprint('sum', add(a=1, b=2))", call_id="c")
        my_question = await mine.next_stop()
        theirs = await (await second.session("race")).executor.reattach("c")
        assert theirs is not None
        their_question = await theirs.next_stop()
        assert isinstance(my_question, ApprovalRequest) and isinstance(their_question, ApprovalRequest)
        assert my_question.id == their_question.id

        async def outcome(execution: Execution) -> str:
            try:
                result = await execution.wait()
            except ApprovalError as error:
                return str(error)
            return result.error.ename if result.error is not None else result.text.strip()

        await my_question.accept()
        await their_question.reject("not this one")
        outcomes = await asyncio.gather(outcome(mine), outcome(theirs))
        late = [o for o in outcomes if "already answered" in o]
        assert len(late) == 1, outcomes
        winner = "app-a" if outcomes[0] == "sum 3" else "app-b"
        assert {"sum 3", "PermissionError"} & set(outcomes) and f"client:{winner}" in late[0], outcomes


@in_module_loop
async def test_a_wrong_token_is_a_clear_service_error(service: HttpIpybox) -> None:
    with pytest.raises(ServiceError, match=r"Unauthorized|token"):
        async with remote(service, token="wrong-token-wrong-token-wrong"):
            pass


@in_module_loop
async def test_no_token_at_all_says_that_ipybox_mcp_token_is_unset(
    service: HttpIpybox, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("IPYBOX_MCP_TOKEN", raising=False)
    with pytest.raises(ServiceError) as raised:
        async with RemoteSessions(service.url, client_name="no-token"):
            pass
    assert "the service requires a token (401) and none was given: IPYBOX_MCP_TOKEN is unset" in str(
        raised.value
    )


@in_module_loop
async def test_cancelling_a_parked_execution_stops_it_in_the_service(
    service: HttpIpybox, tmp_path: Path
) -> None:
    async with remote(service) as sessions:
        executor = (await sessions.session("cancel")).executor
        execution = executor.stream(
            "from mcptools.test import add\nadd(a=1, b=1)\nprint('after')", call_id="x"
        )
        assert isinstance(await execution.next_stop(), ApprovalRequest)
        await execution.cancel("moving on")
        assert await executor.reattach("x") is None
        assert (await executor.stream("print('free')").wait()).text.strip() == "free"


@in_module_loop
async def test_connecting_and_asking_for_the_api_start_no_kernel(service: HttpIpybox) -> None:
    before = session_dirs(service.workspace)
    async with remote(service, "lister") as sessions:
        assert "def add(" in sessions.api_reference()  # the shared servers' API, fetched at start
        executor = (await sessions.session("never-ran")).executor
        assert await executor.cancel_waiting() == 0  # nothing waits, and no kernel is needed to say so
    assert session_dirs(service.workspace) == before


@in_module_loop
async def test_output_arrives_while_the_code_runs_and_before_its_approval(service: HttpIpybox) -> None:
    code = (
        "import sys, time\nprint('first', flush=True)\ntime.sleep(0.5)\nprint('oops', file=sys.stderr)\n"
        "from mcptools.test import add\nprint('sum', add(a=1, b=2))"
    )
    async with remote(service) as sessions:
        executor = (await sessions.session("live")).executor
        seen: list[tuple[str, str, float]] = []
        started = asyncio.get_running_loop().time()
        async for event in executor.stream(code):
            elapsed = asyncio.get_running_loop().time() - started
            if isinstance(event, OutputChunk):
                seen.append((event.stream, event.text, elapsed))
            elif isinstance(event, ApprovalRequest):
                seen.append(("approval", event.name, elapsed))
                await event.accept()
            elif isinstance(event, ExecutionResult):
                assert event.text == "first\noops\nsum 3\n"
        assert [(kind, text) for kind, text, _ in seen] == [
            ("stdout", "first\n"),
            ("stderr", "oops\n"),
            ("approval", "test.add"),
            ("stdout", "sum 3\n"),
        ]
        assert seen[1][2] - seen[0][2] >= 0.4  # the first line came before the sleep, not with the result


@in_module_loop
async def test_a_quick_rounds_output_comes_with_its_answer_in_order(service: HttpIpybox) -> None:
    # A round over in under 0.1 s holds its output back and hands it over with the answer (one
    # plain JSON response): the events are the same as a local executor's, in the same order.
    code = "print('before')\nfrom mcptools.test import add\nprint('sum', add(a=1, b=2))"
    async with remote(service) as sessions:
        executor = (await sessions.session("quick")).executor
        events: list[tuple[str, str]] = []
        async for event in executor.stream(code):
            if isinstance(event, OutputChunk):
                events.append((event.stream, event.text))
            elif isinstance(event, ApprovalRequest):
                events.append(("approval", event.name))
                await event.accept()
            elif isinstance(event, ExecutionResult):
                events.append(("result", event.text))
        assert events == [
            ("stdout", "before\n"),
            ("approval", "test.add"),
            ("stdout", "sum 3\n"),
            ("result", "before\nsum 3\n"),
        ]


@in_module_loop
async def test_execute_runs_code_to_the_end_as_a_code_executor_does(service: HttpIpybox) -> None:
    add = "from mcptools.test import add\nprint('sum', add(a=1, b=2))"
    async with remote(service) as sessions:
        executor = (await sessions.session("execute")).executor
        assert (await executor.execute("print(6 * 7)")).text.strip() == "42"
        with pytest.raises(ConfigError, match=r"approve_all=True"):
            await executor.execute(add)  # no one to ask: refused, and the code stopped in the service
        assert not executor.busy
        assert (await executor.execute(add, approve_all=True)).text.strip() == "sum 3"


@in_module_loop
async def test_ipybox_mcp_over_http_has_no_approvals_inbox(service: HttpIpybox) -> None:
    # Its client is usually a model's: no tool that answers other conversations' approvals.
    async with remote(service, "would-be-inbox") as sessions:
        with pytest.raises(ServiceError, match="list_approvals"):
            await sessions.waiting_approvals()
