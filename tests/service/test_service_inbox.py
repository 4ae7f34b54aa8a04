"""The approvals inbox of ``ipybox serve``: an approval asked through a worker process is listed by
``ipybox approvals`` (a real subprocess) and answered from it; the execution goes on as if its own
worker had answered, and the audit log names who decided each call (``client:<name>``)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from service_kit import TOKEN, Service, Started, run_app, start_app, start_service, wait_for_line

from ipybox_core.approval import ApprovalRequest, ApprovalRules
from ipybox_core.errors import ApprovalError, ExecutionGone
from ipybox_core.executor import ExecutionResult
from ipybox_core.remote import RemoteSessions

RULES = 'allow_read_only = true\ndeny = ["test.die"]\n'


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    """The module's ``ipybox serve``, with approval rules and an audit log."""
    root = tmp_path_factory.mktemp("inbox")
    (root / "rules.toml").write_text(RULES)
    shared = start_service(
        root / "ws", "--approval-rules", str(root / "rules.toml"), "--audit-log", str(root / "audit.jsonl")
    )
    yield shared
    assert shared.stop() == 0


def audit(service: Service, approval_id: str) -> list[tuple[str, bool, str]]:
    """The audit log's decisions of approval ``approval_id``: (tool, approved, decided_by)."""
    path = service.log.parent / "audit.jsonl"
    records = [json.loads(line) for line in path.read_text().splitlines()]
    return [
        (r["tool"], r["approved"], r["decided_by"]) for r in records if r.get("request_id") == approval_id
    ]


def approvals(
    service: Service, *args: str, token_file: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """``ipybox approvals ARGS --url URL`` as a real process (the token from the environment, or the file)."""
    command = [sys.executable, "-m", "ipybox_core.cli", "approvals", *args, "--url", service.url]
    env = {**os.environ, "IPYBOX_MCP_TOKEN": TOKEN}
    if token_file is not None:
        command += ["--token-file", str(token_file)]
        del env["IPYBOX_MCP_TOKEN"]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, env=env, check=False)


def worker(service: Service, conversation: str, call: str, mode: str) -> Started:
    process = start_app("inbox_app.py", service.url, conversation, call, mode)
    assert process.stdin is None
    return process


def holding_worker(service: Service, conversation: str, call: str) -> tuple[Started, str]:
    """A worker process that asked for an approval and stays attached; returns it and the approval id."""
    process = start_app("inbox_app.py", service.url, conversation, call, "hold", stdin=True)
    return process, wait_for_line(process, "asked ").split()[1]


def finish(process: Started, command: str) -> list[str]:
    """Send ``command`` to a holding worker; its remaining output lines."""
    out, err = process.communicate(command + "\n", timeout=120)
    assert process.returncode == 0, err
    return out.splitlines()


def test_an_approval_asked_through_a_worker_is_listed_and_approved_from_the_command_line(
    service: Service, conversation: str, tmp_path: Path
) -> None:
    process, approval_id = holding_worker(service, conversation, "call-1")
    listed = approvals(service, "list", "--conversation", conversation)
    assert listed.returncode == 0, listed.stderr
    [line] = listed.stdout.splitlines()
    assert line.startswith(f"{approval_id}  {conversation} call call-1  test.count ")
    assert f'{{"tag": "{conversation}"}}' in line and "asked by worker-hold" in line and " s ago" in line
    as_json = approvals(service, "list", "--json")
    [mine] = [json.loads(entry) for entry in as_json.stdout.splitlines() if approval_id in entry]
    assert (mine["conversation"], mine["call_id"], mine["read_only"]) == (conversation, "call-1", False)
    token = tmp_path / "token"
    token.write_text(TOKEN + "\n")
    approved = approvals(service, "approve", approval_id[:8], "--client-name", "ops", token_file=token)
    assert (approved.returncode, approved.stderr.strip()) == (
        0,
        f"approved test.count in {conversation} call call-1 ({approval_id[:8]}, asked by worker-hold)",
    )
    assert approvals(service, "list", "--conversation", conversation).stdout == ""
    # the worker still waits on its own request: picking the call up gets what the inbox's answer did
    assert finish(process, "reattach") == ["result count 1", "decided client:ops"]
    assert audit(service, approval_id) == [("count", True, "client:ops")]


def test_an_approval_answered_while_no_worker_is_attached_reaches_the_worker_that_resumes(
    service: Service, conversation: str
) -> None:
    leaver = worker(service, conversation, "call-2", "leave")
    approval_id = wait_for_line(leaver, "asked ").split()[1]
    assert leaver.wait(60) == 0
    rejected = approvals(service, "reject", approval_id, "--reason", "not today", "--client-name", "ops")
    assert rejected.returncode == 0, rejected.stderr
    resumer = worker(service, conversation, "call-2", "resume")
    out, err = resumer.communicate(timeout=120)
    assert out.splitlines() == ["result refused test.count was rejected: not today"], err
    assert audit(service, approval_id) == [("count", False, "client:ops")]
    again = worker(service, conversation, "call-2", "resume")  # the outcome was handed over once
    assert again.communicate(timeout=120)[0].splitlines() == ["gone"]


def test_a_worker_that_answers_after_the_inbox_gets_the_inbox_outcome_and_is_told(
    service: Service, conversation: str
) -> None:
    process, approval_id = holding_worker(service, conversation, "call-3")
    approved = approvals(service, "approve", approval_id, "--client-name", "ops")
    assert approved.returncode == 0, approved.stderr
    lines = finish(process, "accept")  # its own answer comes second: not applied, the call ran once
    assert lines[0] == "result count 1"
    assert lines[1].startswith(
        "note Note: this approval was already answered from the approvals inbox by client:ops"
    )
    assert audit(service, approval_id) == [("count", True, "client:ops")]


async def test_two_answers_at_once_one_wins_and_the_other_names_it(
    service: Service, conversation: str
) -> None:
    async with (
        RemoteSessions(service.url, token=TOKEN, client_name="asker") as asker,
        RemoteSessions(service.url, token=TOKEN, client_name="alice") as alice,
        RemoteSessions(service.url, token=TOKEN, client_name="bob") as bob,
    ):
        executor = (await asker.session(conversation)).executor
        execution = executor.stream(
            f"from mcptools.test import count\nprint('count', count(tag={conversation!r}))", call_id="c4"
        )
        request = await execution.next_stop()
        assert isinstance(request, ApprovalRequest)
        [listed] = await alice.waiting_approvals(conversation)
        assert (listed.id, listed.asked_by, listed.name, listed.call_id) == (
            request.id,
            "asker",
            "test.count",
            "c4",
        )
        answers = await asyncio.gather(
            alice.answer_approval(request.id, approve=True),
            bob.answer_approval(request.id, approve=False, reason="no"),
            return_exceptions=True,
        )
        [lost] = [answer for answer in answers if isinstance(answer, BaseException)]
        assert isinstance(lost, ApprovalError), lost
        winner = "alice" if not isinstance(answers[0], BaseException) else "bob"
        assert {answer.id for answer in answers if not isinstance(answer, BaseException)} == {request.id}
        assert lost.decided_by == f"client:{winner}" and f"already answered by client:{winner}" in str(lost)
        late = approvals(service, "approve", request.id)
        assert late.returncode == 3
        assert (
            late.stderr.strip()
            == f"ipybox: error: approval {request.id} was already answered by client:{winner}"
        )
        again = await executor.reattach("c4")
        assert again is execution
        result = await execution.next_stop()
        assert isinstance(result, ExecutionResult)
        assert ("count 1" in result.text) == (winner == "alice")
        assert request.decision is not None and request.decision.decided_by == f"client:{winner}"
    with pytest.raises(ExecutionGone):
        async with RemoteSessions(service.url, token=TOKEN, client_name="late") as late_client:
            await late_client.answer_approval("0" * 32, approve=True)


NARROWED = """\
from mcptools.test import add, die
for call in (lambda: add(a={a}, b=1), lambda: die()):
    try:
        print('ran', call())
    except PermissionError as error:
        print('refused', error)
"""


def audit_of(service: Service, tool: str, **arguments: object) -> list[tuple[bool, str]]:
    """The audit log's decisions of the calls of ``tool`` with ``arguments``: (approved, decided_by)."""
    path = service.log.parent / "audit.jsonl"
    records = [json.loads(line) for line in path.read_text().splitlines()]
    return [
        (r["approved"], r["decided_by"]) for r in records if r.get("tool") == tool and r["args"] == arguments
    ]


async def test_a_client_narrows_the_services_rules_for_its_sessions_and_never_widens_them(
    service: Service, conversation: str
) -> None:
    # The service allows add (read-only) and denies die. The client denies add, and tries to allow die.
    client = ApprovalRules(deny=["test.add"], allow=["test.die", "test.count"], default="allow")
    async with RemoteSessions(
        service.url, token=TOKEN, client_name="narrow", approval_rules=client
    ) as sessions:
        executor = (await sessions.session(conversation)).executor
        ran = await executor.stream(NARROWED.format(a=1001)).next_stop()
        assert isinstance(ran, ExecutionResult)
        assert ran.text.splitlines() == [
            "refused test.add was rejected: denied by policy:client deny test.add",
            "refused test.die was rejected: denied by policy:deny test.die",  # not widened
        ]
        counting = executor.stream(f"from mcptools.test import count\nprint(count(tag={conversation!r}))")
        asked = await counting.next_stop()  # the service asks about count: the client's allow changes nothing
        assert isinstance(asked, ApprovalRequest) and asked.name == "test.count"
        await asked.reject("no")
        await counting.wait()
        executor.approval_rules = ApprovalRules(default="ask")  # this session only: allowed calls are asked
        asking = executor.stream(NARROWED.format(a=1002))
        add = await asking.next_stop()
        assert isinstance(add, ApprovalRequest) and add.name == "test.add"
        await add.accept()
        assert "ran 1003" in (await asking.wait()).text
        other = (await sessions.session(f"{conversation}-other")).executor  # the client's rules: add refused
        assert "policy:client deny test.add" in (await other.stream(NARROWED.format(a=1003)).wait()).text
    async with RemoteSessions(
        service.url, token=TOKEN, client_name="plain"
    ) as plain:  # no rules: the service's
        executor = (await plain.session(conversation)).executor
        assert "ran 1005" in (await executor.stream(NARROWED.format(a=1004)).wait()).text
    assert audit_of(service, "add", a=1001, b=1) == [(False, "policy:client deny test.add")]
    assert audit_of(service, "add", a=1002, b=1) == [(True, "client:narrow")]
    assert audit_of(service, "add", a=1004, b=1) == [(True, "policy:read-only")]
    assert audit_of(service, "die") == [(False, "policy:deny test.die")] * 4


async def test_an_inbox_answer_runs_the_code_to_its_next_approval_which_is_listed_and_reaches_the_worker(
    service: Service, conversation: str
) -> None:
    count = f"count(tag={conversation!r})"
    code = f"from mcptools.test import count\nfirst = {count}\nprint('counts', first, {count})"
    async with (
        RemoteSessions(service.url, token=TOKEN, client_name="asker") as asker,
        RemoteSessions(service.url, token=TOKEN, client_name="ops") as ops,
    ):
        executor = (await asker.session(conversation)).executor
        execution = executor.stream(code, call_id="c5")
        first = await execution.next_stop()
        assert isinstance(first, ApprovalRequest)
        await ops.answer_approval(first.id, approve=True)
        listed = await ops.waiting_approvals(conversation)
        while not listed or listed[0].id == first.id:  # the code goes on in the service meanwhile
            listed = await ops.waiting_approvals(conversation)
        [second] = listed
        assert (second.call_id, second.asked_by, second.name) == ("c5", "asker", "test.count")
        again = await executor.reattach("c5")
        assert again is execution
        stop = await execution.next_stop()  # the worker's execution went on to the second question
        assert isinstance(stop, ApprovalRequest) and stop.id == second.id
        assert first.decision is not None and first.decision.decided_by == "client:ops"
        await stop.accept()
        result = await execution.wait()
        assert result.text.strip() == "counts 1 2"  # each approved call ran once
    assert audit(service, first.id) == [("count", True, "client:ops")]
    assert audit(service, second.id) == [("count", True, "client:asker")]


def test_a_pydantic_ai_run_resumed_after_the_inbox_approved_gets_the_result_of_the_one_run(
    service: Service, conversation: str, tmp_path: Path
) -> None:
    state = tmp_path / "run.json"
    started = run_app("pai_app.py", "start", service.url, str(state))  # process A parks its run, exits
    assert started.returncode == 0 and "PARKED" in started.stdout, started.stderr
    [line] = [line for line in approvals(service, "list").stdout.splitlines() if conversation in line]
    assert "test.count" in line and "asked by pai-start" in line
    approval_id = line.split()[0]
    approved = approvals(service, "approve", approval_id, "--client-name", "ops")
    assert approved.returncode == 0, approved.stderr
    resumed = run_app("pai_app.py", "answer", service.url, str(state), "approve")  # process B
    assert resumed.returncode == 0, resumed.stderr
    assert "count 1 kept" in resumed.stdout  # the inbox's answer ran the call once, in A's kernel
    assert audit(service, approval_id) == [("count", True, "client:ops")]


async def test_the_inbox_approves_with_edited_arguments_and_the_audit_log_keeps_both(
    service: Service, conversation: str
) -> None:
    async with (
        RemoteSessions(service.url, token=TOKEN, client_name="asker") as asker,
        RemoteSessions(service.url, token=TOKEN, client_name="editor") as editor,
    ):
        executor = (await asker.session(conversation)).executor
        edited = {"tag": f"{conversation}-edited"}
        counted = await executor.execute(
            f"from mcptools.test import count\nprint(count(**{edited!r}))", approve_all=True
        )
        assert counted.text.strip() == "1"
        execution = executor.stream(
            "from mcptools.test import count\nprint(count(tag='asked'))", call_id="c7"
        )
        request = await execution.next_stop()
        assert isinstance(request, ApprovalRequest)
        await editor.answer_approval(request.id[:8], approve=True, arguments=edited)  # a prefix is enough
        resumed = await executor.reattach("c7")
        assert resumed is execution
        assert (await execution.wait()).text.strip() == "2"  # the edited call ran, not the asked one
    path = service.log.parent / "audit.jsonl"
    [record] = [json.loads(line) for line in path.read_text().splitlines() if request.id in line]
    assert (record["args"], record["edited_args"], record["decided_by"]) == (
        {"tag": "asked"},
        edited,
        "client:editor",
    )


async def test_moving_on_after_an_inbox_answer_cancels_what_the_answer_started(
    service: Service, conversation: str
) -> None:
    count = f"count(tag={conversation!r})"
    code = f"from mcptools.test import count\nfirst = {count}\nprint('counts', first, {count})"
    async with (
        RemoteSessions(service.url, token=TOKEN, client_name="asker") as asker,
        RemoteSessions(service.url, token=TOKEN, client_name="ops") as ops,
    ):
        executor = (await asker.session(conversation)).executor
        first = await executor.stream(code, call_id="c8").next_stop()
        assert isinstance(first, ApprovalRequest)
        await ops.answer_approval(first.id, approve=True)
        listed = await ops.waiting_approvals(conversation)
        while not listed or listed[0].id == first.id:  # the code goes on to its second call
            listed = await ops.waiting_approvals(conversation)
        assert await executor.cancel_waiting(reason="the user moved on") == 1  # the conversation moved on
        assert await ops.waiting_approvals(conversation) == []
        assert await executor.reattach("c8") is None
        after = await executor.execute(f"from mcptools.test import count\nprint({count})", approve_all=True)
        assert after.text.strip() == "2"  # the first call ran once, the second never
    assert audit(service, listed[0].id) == [("count", False, "moved-on")]


async def test_a_langchain_thread_that_moves_on_after_an_inbox_answer_gets_the_calls_real_result(
    service: Service,
) -> None:
    """The inbox approved the call and its code ran to the end in the service; the thread then gets new
    input instead of a resume: the call's tool message is its result, not "did not run"."""
    from langchain_core.messages import AIMessage, BaseMessage

    from integrations.langchain.lc_kit import (
        config,
        make_agent,
        only_interrupt,
        text_of,
        tool_call,
        tool_messages,
        user,
    )
    from ipybox_integrations.langchain import CodeActionMiddleware

    thread = "lc-inbox-moves-on"

    def script(messages: list[BaseMessage]) -> AIMessage:
        if sum(1 for message in messages if message.type == "human") == 1 and messages[-1].type == "human":
            return AIMessage(content="", tool_calls=[tool_call(count_code(thread), "call_1")])
        return AIMessage(content="done")

    async with (
        RemoteSessions(service.url, token=TOKEN, client_name="lc-worker") as sessions,
        RemoteSessions(service.url, token=TOKEN, client_name=INBOX) as inbox,
    ):
        _, agent = make_agent([CodeActionMiddleware(sessions)], script)
        only_interrupt(await agent.ainvoke(user("go"), config(thread), version="v2"))
        (waiting,) = await inbox.waiting_approvals(conversation=thread)
        await inbox.answer_approval(waiting.id, approve=True)
        after = await agent.ainvoke(user("and now?"), config(thread), version="v2")
    (result,) = tool_messages(after.value)
    assert text_of(result).strip() == "count 1", text_of(result)
    assert audit(service, waiting.id)[0][1:] == (True, f"client:{INBOX}")


INBOX = "operator-inbox"


def count_code(tag: str) -> str:
    return f"from mcptools.test import count\nprint('count', count(tag={tag!r}))"
