"""The audit log may lie in the workspace: what sandboxed code plants there is refused, never followed.

Each attack has a control showing the plain ``open(path, "a")`` the log used before falling for it.
"""

from __future__ import annotations

import asyncio
import os
import threading
from pathlib import Path

import pytest

from blocking_kit import blocks_on_fifo, bounded
from ipybox_core.approval import ApprovalGate, ApprovalRequest, AuditLog
from ipybox_core.approval.request import ApprovalDecision
from ipybox_core.errors import UnsafePathError


def request() -> ApprovalRequest:
    return ApprovalRequest(kind="mcp", server="fs", tool="write", args={"path": "/x"})


DECISION = ApprovalDecision(approved=True, decided_by="user")


def plain_append(path: Path) -> None:
    """What the audit log did before."""
    with path.open("a", encoding="utf-8") as stream:
        stream.write('{"planted": true}\n')


@pytest.fixture
def target(tmp_path: Path) -> Path:
    path = tmp_path / "host" / "authorized_keys"
    path.parent.mkdir()
    path.write_text("root only\n")
    return path


async def test_a_symlink_at_the_log_is_refused(tmp_path: Path, target: Path) -> None:
    log = tmp_path / "audit.jsonl"
    audit = AuditLog(log)
    log.symlink_to(target)
    with pytest.raises(UnsafePathError, match=r"audit\.jsonl: it is a symbolic link"):
        audit.record(request(), DECISION)
    assert target.read_text() == "root only\n"
    plain_append(log)  # control
    assert target.read_text() != "root only\n"


async def test_a_fifo_at_the_log_never_blocks(tmp_path: Path) -> None:
    log = tmp_path / "audit.jsonl"
    audit = AuditLog(log)
    os.mkfifo(log)
    pending = request()
    error = bounded(lambda: audit.record(pending, DECISION))
    assert isinstance(error, UnsafePathError) and "audit.jsonl: it is a FIFO" in str(error)
    assert isinstance(bounded(audit.read), UnsafePathError)
    # control: the plain append-mode open waits for a reader
    assert blocks_on_fifo(log, lambda: plain_append(log))


async def test_a_hard_link_at_the_log_is_refused(tmp_path: Path, target: Path) -> None:
    log = tmp_path / "audit.jsonl"
    audit = AuditLog(log)
    os.link(target, log)
    with pytest.raises(UnsafePathError, match="2 hard links"):
        audit.record(request(), DECISION)
    assert target.read_text() == "root only\n"
    plain_append(log)  # control
    assert target.read_text() != "root only\n"


async def test_a_directory_below_the_workspace_swapped_for_a_symlink_is_refused(
    tmp_path: Path, target: Path
) -> None:
    workspace = tmp_path / "workspace"
    (workspace / "logs").mkdir(parents=True)
    audit = AuditLog(workspace / "logs" / "audit.jsonl", untrusted_below=workspace)
    audit.record(request(), DECISION)
    (workspace / "logs" / "audit.jsonl").unlink()
    (workspace / "logs").rmdir()
    (workspace / "logs").symlink_to(target.parent)
    with pytest.raises(UnsafePathError, match=r"workspace/logs: it is a symbolic link"):
        audit.record(request(), DECISION)
    assert sorted(p.name for p in target.parent.iterdir()) == ["authorized_keys"]
    plain_append(workspace / "logs" / "audit.jsonl")  # control
    assert (target.parent / "audit.jsonl").exists()


async def test_a_directory_swapped_after_the_log_was_created_is_not_followed(
    tmp_path: Path, target: Path
) -> None:
    """Without ``untrusted_below`` the directory is resolved once, when the log is created."""
    logs = tmp_path / "logs"
    logs.mkdir()
    audit = AuditLog(logs / "audit.jsonl")
    logs.rename(tmp_path / "moved")
    logs.symlink_to(target.parent)
    with pytest.raises(UnsafePathError, match="logs: it is a symbolic link"):
        audit.record(request(), DECISION)
    assert sorted(p.name for p in target.parent.iterdir()) == ["authorized_keys"]


async def test_records_are_appended_and_read_back(tmp_path: Path) -> None:
    audit = AuditLog(tmp_path / "new" / "dir" / "audit.jsonl")
    audit.record(request(), DECISION)
    audit.record(request(), ApprovalDecision(approved=False, decided_by="timeout"))
    assert [r.decided_by for r in audit.read()] == ["user", "timeout"]
    assert AuditLog(tmp_path / "empty.jsonl").read() == []


async def test_the_gate_writes_the_log_off_the_event_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    audit = AuditLog(tmp_path / "audit.jsonl")
    threads: list[threading.Thread] = []
    original = AuditLog.record

    def spy(self: AuditLog, req: ApprovalRequest, decision: ApprovalDecision) -> object:
        threads.append(threading.current_thread())
        return original(self, req, decision)

    monkeypatch.setattr(AuditLog, "record", spy)
    gate = ApprovalGate("never", audit=audit)
    await gate.decide(request())
    gate.policy = "always"
    gate.listen(lambda r: None)
    waiting = asyncio.ensure_future(gate.decide(request()))
    await asyncio.sleep(0)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert len(threads) == 2 and threading.current_thread() not in threads
    assert [r.decided_by for r in audit.read()] == ["policy:never", "abandoned"]
