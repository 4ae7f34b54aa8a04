"""Policies, the gate and the audit log."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from ipybox_core.approval import ApprovalGate, ApprovalRequest, ApprovalRules, AuditLog
from ipybox_core.errors import ApprovalError, ConfigError
from ipybox_core.mcp.types import ToolAnnotations


def mcp_request(name: str = "github.search_repos", read_only: bool | None = None) -> ApprovalRequest:
    server, tool = name.split(".", 1)
    return ApprovalRequest(
        kind="mcp",
        server=server,
        tool=tool,
        args={"q": "x"},
        annotations=ToolAnnotations(read_only_hint=read_only),
    )


async def test_never_approves_without_asking() -> None:
    gate = ApprovalGate("never")
    asked: list[ApprovalRequest] = []
    gate.listen(asked.append)
    decision = await gate.decide(mcp_request())
    assert decision.approved and decision.decided_by == "policy:never" and not asked


async def test_always_asks_the_listener() -> None:
    gate = ApprovalGate("always")
    asked: list[ApprovalRequest] = []
    gate.listen(asked.append)
    task = asyncio.ensure_future(gate.decide(mcp_request()))
    await asyncio.sleep(0)
    assert len(asked) == 1 and asked[0].pending
    await asked[0].accept()
    assert (await task).approved


async def test_without_listener_calls_are_rejected_with_a_reason() -> None:
    decision = await ApprovalGate("always").decide(mcp_request())
    assert not decision.approved and "no execution is active" in (decision.reason or "")


@pytest.mark.parametrize(
    ("rules", "name", "read_only", "expected"),
    [
        (ApprovalRules(allow=["github.search_*"]), "github.search_repos", None, "allow"),
        (ApprovalRules(allow=["github.search_*"]), "github.delete_repo", None, "ask"),
        (ApprovalRules(allow=["github.*"], deny=["github.delete_*"]), "github.delete_repo", None, "deny"),
        (ApprovalRules(allow_read_only=True), "fs.read_file", True, "allow"),
        (ApprovalRules(allow_read_only=True), "fs.write_file", False, "ask"),
        (ApprovalRules(allow_read_only=False), "fs.read_file", True, "ask"),
        (ApprovalRules(default="deny"), "fs.read_file", True, "deny"),
        (ApprovalRules(default="allow", deny=["*.rm*"]), "fs.rmdir", None, "deny"),
    ],
)
async def test_rules(rules: ApprovalRules, name: str, read_only: bool | None, expected: str) -> None:
    assert rules.match(mcp_request(name, read_only))[0] == expected


async def test_shell_rules_match_the_command_line() -> None:
    rules = ApprovalRules(allow=["shell:ls*", "shell:git status"])
    shell = ApprovalRequest(kind="shell", server="", tool="shell", args={"command": "git status"})
    assert rules.match(shell)[0] == "allow"
    other = ApprovalRequest(kind="shell", server="", tool="shell", args={"command": "git push"})
    assert rules.match(other)[0] == "ask"


async def test_callable_policy_sync_and_async() -> None:
    gate = ApprovalGate(lambda r: r.tool.startswith("search"))
    assert (await gate.decide(mcp_request("github.search"))).approved
    assert not (await gate.decide(mcp_request("github.delete"))).approved

    async def ask_for_deletes(request: ApprovalRequest) -> bool | None:
        return None if request.tool.startswith("delete") else True

    gate = ApprovalGate(ask_for_deletes)
    asked: list[ApprovalRequest] = []
    gate.listen(asked.append)
    assert (await gate.decide(mcp_request("github.search"))).approved
    task = asyncio.ensure_future(gate.decide(mcp_request("github.delete")))
    await asyncio.sleep(0)
    await asked[0].reject("nope")
    assert (await task).reason == "nope"


async def test_invalid_policy_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="invalid approval policy"):
        ApprovalGate("sometimes")  # type: ignore[arg-type]


async def test_double_decision_is_an_error() -> None:
    request = mcp_request()
    await request.accept()
    with pytest.raises(ApprovalError, match="already decided by user"):
        await request.reject()


async def test_timeout_and_audit_log(tmp_path: Path) -> None:
    audit = AuditLog(tmp_path / "logs" / "audit.jsonl")
    gate = ApprovalGate("always", timeout=0.05, audit=audit)
    gate.listen(lambda r: None)
    decision = await gate.decide(mcp_request())
    assert (decision.approved, decision.decided_by) == (False, "timeout")
    gate.policy = "never"
    await gate.decide(mcp_request("fs.read"))
    records = audit.read()
    assert [(r.server, r.tool, r.approved, r.decided_by) for r in records] == [
        ("github", "search_repos", False, "timeout"),
        ("fs", "read", True, "policy:never"),
    ]
    assert records[0].args == {"q": "x"} and records[0].time > 0


async def test_cancelled_wait_abandons_the_request(tmp_path: Path) -> None:
    audit = AuditLog(tmp_path / "audit.jsonl")
    gate = ApprovalGate("always", audit=audit)
    asked: list[ApprovalRequest] = []
    gate.listen(asked.append)
    task = asyncio.ensure_future(gate.decide(mcp_request()))
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not asked[0].pending
    with pytest.raises(ApprovalError, match="abandoned"):
        await asked[0].accept()
    assert audit.read()[0].decided_by == "abandoned"


async def test_hints_name_the_annotations_an_approver_should_see() -> None:
    assert mcp_request(read_only=True).hints == ["read-only"]
    destructive = ApprovalRequest(
        kind="mcp", server="fs", tool="rm", args={}, annotations=ToolAnnotations(destructive_hint=True)
    )
    assert destructive.hints == ["destructive"]
    assert mcp_request().hints == []


@pytest.mark.parametrize("timeout", [None, 30.0])
async def test_a_decision_reaches_the_waiting_call_in_one_event_loop_step(timeout: float | None) -> None:
    """The approval path adds one hop: the application's decision wakes the gate's waiting call
    directly (no shield or wait_for in between), with or without an approval timeout."""
    gate = ApprovalGate("always", timeout=timeout)
    asked: list[ApprovalRequest] = []
    gate.listen(asked.append)
    call = asyncio.ensure_future(gate.decide(ApprovalRequest(kind="mcp", server="s", tool="t", args={})))
    while not asked:
        await asyncio.sleep(0)
    await asked[0].accept()
    await asyncio.sleep(0)  # one step of the event loop
    assert call.done()
    assert call.result().decided_by == "user"


async def test_cancelling_the_waiting_call_abandons_the_request() -> None:
    gate = ApprovalGate("always", timeout=30)
    asked: list[ApprovalRequest] = []
    gate.listen(asked.append)
    call = asyncio.ensure_future(gate.decide(ApprovalRequest(kind="mcp", server="s", tool="t", args={})))
    while not asked:
        await asyncio.sleep(0)
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    assert not asked[0].pending
    with pytest.raises(ApprovalError, match="abandoned"):
        await asked[0].accept()
