"""PydanticAI on ``ipybox serve``: a run parked in one process is answered from another (real processes)."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

from service_kit import ABANDONED, Service, count_now, killed_while_waiting, run_app, start_service

STALE = "no longer waits for an approval"


def start(service: Service, state: Path) -> None:
    """Process A: run until ipybox asks for approval, save the run's state to ``state``, exit."""
    started = run_app("pai_app.py", "start", service.url, str(state))
    assert started.returncode == 0 and "PARKED" in started.stdout, started.stderr


def answer(service: Service, state: Path, decision: str = "approve") -> str:
    done = run_app(
        "pai_app.py", decision if decision == "moveon" else "answer", service.url, str(state), decision
    )
    assert done.returncode == 0, done.stderr
    line = next(line for line in done.stdout.splitlines() if line.startswith("OUTPUT "))
    return str(json.loads(line.removeprefix("OUTPUT ")))


def test_process_b_answers_what_process_a_left_and_the_call_runs_once(
    tmp_path: Path, service: Service
) -> None:
    state = tmp_path / "run.json"
    start(service, state)
    output = answer(service, state)
    assert "count 1 kept" in output  # the kernel kept `state`; count() ran once, approved by B


def test_process_a_killed_while_its_approval_waits_is_answered_by_process_b(
    tmp_path: Path, service: Service
) -> None:
    state = tmp_path / "run.json"
    killed_while_waiting("pai_app.py", service, state, "PARKED")
    output = answer(service, state, "reject")
    assert "PermissionError" in output and "not now" in output and "count 1" not in output


def test_a_service_restart_makes_the_resume_say_so_and_nothing_runs_twice(tmp_path: Path) -> None:
    service = start_service(tmp_path / "ws")
    state = tmp_path / "run.json"
    try:
        started = run_app("pai_app.py", "start", service.url, str(state))
        assert started.returncode == 0, started.stderr
    finally:
        assert service.stop() == 0
    restarted = start_service(tmp_path / "ws")
    try:
        output = answer(restarted, state)
        assert STALE in output and "count" not in re.sub(r"count\([^)]*\)", "", output)
    finally:
        assert restarted.stop() == 0


def test_an_application_without_the_token_is_refused(tmp_path: Path, service: Service) -> None:
    refused = run_app("pai_app.py", "start", service.url, str(tmp_path / "run.json"), token="wrong-token")
    assert refused.returncode != 0
    last = refused.stderr.strip().splitlines()[-1]
    assert last.startswith("ipybox_core.errors.ServiceError: cannot connect") and "Unauthorized" in last


def test_a_new_run_in_another_process_cancels_what_waits_and_frees_the_kernel(
    tmp_path: Path, service: Service, conversation: str
) -> None:
    state = tmp_path / "run.json"
    start(service, state)
    output = answer(service, state, "moveon")  # B moves on: a new run, no answer
    assert ABANDONED in output and "free kept" in output, output  # told; kernel free, state kept
    assert asyncio.run(count_now(service, conversation, "call_1_0")) == "count 1"


def test_an_abort_from_another_process_cancels_the_execution_in_the_service(
    tmp_path: Path, service: Service, conversation: str
) -> None:
    state = tmp_path / "run.json"
    start(service, state)
    output = answer(service, state, "abort")
    assert "stop: the user aborted" in output and "count 1" not in output, output
    # nobody can approve it any more, and count() never ran
    assert asyncio.run(count_now(service, conversation, "call_1_0")) == "count 1"
