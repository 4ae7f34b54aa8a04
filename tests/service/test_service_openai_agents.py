"""OpenAI Agents SDK on ``ipybox serve``: a RunState parked by one process is resumed by another
(real processes: ``oa_app.py``)."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

from service_kit import (
    ABANDONED,
    CONVERSATION_ENV,
    Service,
    count_now,
    killed_while_waiting,
    run_app,
    start_service,
)

GONE = "no longer waits for an approval"


def start(service: Service, state: Path) -> None:
    started = run_app("oa_app.py", "start", service.url, str(state))
    assert started.returncode == 0, started.stderr
    tag = os.environ[CONVERSATION_ENV]
    assert f'PARKED [["test", "count", {{"tag": "{tag}"}}]]' in started.stdout


def answer(service: Service, state: Path, decision: str) -> dict[str, Any]:
    role = "moveon" if decision == "moveon" else "answer"
    done = run_app("oa_app.py", role, service.url, str(state), decision)
    assert done.returncode == 0, done.stderr
    line = next(line for line in done.stdout.splitlines() if line.startswith("OUTPUT "))
    summary: dict[str, Any] = json.loads(line.removeprefix("OUTPUT "))
    assert summary["final"] == "done" and summary["interruptions"] == []
    return summary


def test_process_b_approves_what_process_a_left_and_the_call_runs_once(
    tmp_path: Path, service: Service
) -> None:
    state = tmp_path / "run.json"
    start(service, state)
    outputs = answer(service, state, "approve")["outputs"]
    # B's model sees the result of A's execute_code call: same kernel (`state`), count() ran once
    assert outputs[-1] == "count 1 kept"


def test_process_a_killed_while_waiting_and_process_b_rejects(tmp_path: Path, service: Service) -> None:
    state = tmp_path / "run.json"
    killed_while_waiting("oa_app.py", service, state, "PARKED")
    output = answer(service, state, "reject")["outputs"][-1]
    assert "PermissionError: test.count was rejected: not now" in output
    assert "count 1" not in output


def test_a_service_restart_makes_the_resume_say_so_and_nothing_runs_twice(tmp_path: Path) -> None:
    service = start_service(tmp_path / "ws")
    state = tmp_path / "run.json"
    try:
        start(service, state)
    finally:
        assert service.stop() == 0
    restarted = start_service(tmp_path / "ws")
    try:
        output = answer(restarted, state, "approve")["outputs"][-1]
        assert output.startswith("Error:") and GONE in output and "the ipybox service restarted" in output
        assert "count 1" not in output and "kept" not in output
    finally:
        assert restarted.stop() == 0


def test_a_new_run_in_another_process_cancels_what_waits_and_frees_the_kernel(
    tmp_path: Path, service: Service, conversation: str
) -> None:
    state = tmp_path / "run.json"
    start(service, state)
    output = answer(service, state, "moveon")["outputs"][-1]  # B: a new run, the state ignored
    assert output.startswith(f"Note: {ABANDONED}") and output.endswith("free kept"), output
    assert asyncio.run(count_now(service, conversation, "outer-2")) == "count 1"  # never ran
