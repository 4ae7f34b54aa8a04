"""LangChain on ``ipybox serve``: an interrupt left by one process is answered from another (real processes).

Each application process builds the same agent (``CodeActionMiddleware(RemoteSessions(url))``) on
the same SQLite checkpoint file; the kernel and the parked MCP call live in the service. The test
server's ``count(tag=<conversation>)`` returns 1 on its first call for the test's conversation, so "count 1"
means it ran once. The tests share one service (``conftest.py``); the restart test starts its own.
"""

from __future__ import annotations

import asyncio
import json
import signal
from pathlib import Path
from typing import Any

from service_kit import (
    TOKEN,
    Service,
    count_now,
    killed_while_waiting,
    run_app,
    start_app,
    start_service,
    wait_for_line,
)

from ipybox_core.approval import ApprovalRequest
from ipybox_core.remote import RemoteSessions

GONE = "no longer waits for an approval"


def resume(service: Service, db: Path, decision: str) -> dict[str, Any]:
    role = "moveon" if decision == "moveon" else "resume"
    done = run_app("lc_app.py", role, service.url, str(db), decision)
    assert done.returncode == 0, done.stderr
    line = next(line for line in done.stdout.splitlines() if line.startswith("OUTPUT "))
    report: dict[str, Any] = json.loads(line.removeprefix("OUTPUT "))
    return report


def start(service: Service, db: Path, *extra: str, action: str = "test.count") -> None:
    started = run_app("lc_app.py", "start", service.url, str(db), *extra)
    assert started.returncode == 0, started.stderr
    assert f'INTERRUPTED "{action}"' in started.stdout, started.stdout


def test_process_b_approves_what_process_a_left_and_the_call_runs_once(
    tmp_path: Path, service: Service
) -> None:
    db = tmp_path / "checkpoints.sqlite"
    start(service, db)
    report = resume(service, db, "approve")
    assert report["interrupts"] == []
    assert report["tools"][-1] == "count 1 kept"  # A's kernel and variable; count() ran once


def test_a_resume_without_an_answer_in_another_process_asks_again(tmp_path: Path, service: Service) -> None:
    db = tmp_path / "checkpoints.sqlite"
    start(service, db)
    asked = resume(service, db, "none")  # ainvoke(None): no decision, so the call must not run
    assert asked["interrupts"] == ["test.count"] and len(asked["tools"]) == 1
    report = resume(service, db, "approve")
    assert report["interrupts"] == [] and report["tools"][-1] == "count 1 kept"


def test_process_a_killed_while_its_interrupt_waits_is_rejected_by_process_b(
    tmp_path: Path, service: Service
) -> None:
    db = tmp_path / "checkpoints.sqlite"
    assert killed_while_waiting("lc_app.py", service, db, "INTERRUPTED") == 'INTERRUPTED "test.count"'
    report = resume(service, db, "reject")
    assert report["interrupts"] == []
    last = report["tools"][-1]
    assert "PermissionError" in last and "not now" in last and "count 1" not in last
    approved = resume(service, db, "approve")  # a late second answer runs nothing
    assert not any("count 1" in text for text in approved["tools"]), approved


def test_new_input_after_the_process_was_killed_while_code_ran_says_why_the_call_has_no_result(
    tmp_path: Path, service: Service
) -> None:
    # A is SIGKILLed while its code runs (no approval pending); the service stops that code. B's new
    # input closes the call with the true cause, and the kernel is free with its state kept.
    db = tmp_path / "checkpoints.sqlite"
    runner = start_app("lc_app.py", "start", service.url, str(db), "running")
    assert wait_for_line(runner, "RUNNING") == "RUNNING"
    runner.send_signal(signal.SIGKILL)
    runner.wait()
    report = resume(service, db, "moveon")
    assert report["interrupts"] == [] and report["tools"][-1] == "free kept", report
    closing = report["tools"][-2]
    assert "stopped before it finished" in closing and "lost its connection" in closing, closing
    assert "approval" not in closing  # no approval was pending: the model is not told one was


def test_a_service_restart_makes_the_resume_say_so_and_nothing_runs_twice(tmp_path: Path) -> None:
    service = start_service(tmp_path / "ws")
    db = tmp_path / "checkpoints.sqlite"
    try:
        start(service, db)
    finally:
        assert service.stop() == 0
    restarted = start_service(tmp_path / "ws")
    try:
        report = resume(restarted, db, "approve")
        assert report["interrupts"] == []
        last = report["tools"][-1]
        assert GONE in last and "the ipybox service restarted" in last and "did not run" in last
        assert not any("count 1" in text for text in report["tools"]), report
    finally:
        assert restarted.stop() == 0


async def approve_elsewhere(service: Service, conversation: str, call_id: str) -> str:
    """Answer the call's pending approval from a third client; the name of the next one it waits for."""
    async with RemoteSessions(service.url, token=TOKEN, client_name="elsewhere") as sessions:
        executor = (await sessions.session(conversation)).executor
        execution = await executor.reattach(call_id)
        assert execution is not None
        request = await execution.next_stop()
        assert isinstance(request, ApprovalRequest) and request.name == "test.add"
        await request.accept()
        following = await execution.next_stop()
        assert isinstance(following, ApprovalRequest)
        return following.name


def test_an_answer_to_an_interrupt_that_shows_another_call_is_not_applied(
    tmp_path: Path, service: Service, conversation: str
) -> None:
    # The checkpoint's interrupt shows add(); meanwhile add() was answered elsewhere and count() waits.
    # A resume answers what the checkpoint shows: it must not approve count(), which nobody saw.
    db = tmp_path / "checkpoints.sqlite"
    start(service, db, "add", action="test.add")
    assert asyncio.run(approve_elsewhere(service, conversation, "call_1")) == "test.count"
    asked = resume(service, db, "approve")
    assert asked["interrupts"] == ["test.count"] and len(asked["tools"]) == 1  # asked, not run
    report = resume(service, db, "approve")
    assert report["interrupts"] == [] and report["tools"][-1] == "count 1 kept"


def test_new_input_in_another_process_cancels_what_waits_and_frees_the_kernel(
    tmp_path: Path, service: Service, conversation: str
) -> None:
    db = tmp_path / "checkpoints.sqlite"
    start(service, db)
    report = resume(service, db, "moveon")  # B: new input on the thread, no answer
    assert report["interrupts"] == [] and report["tools"][-1] == "free kept", report
    assert "abandoned" in report["tools"][-2] and "did not run" in report["tools"][-2]  # told
    assert asyncio.run(count_now(service, conversation, "call_1")) == "count 1"  # never ran
