"""TimeoutGuard: when a timed-out execution gets interrupted (time is faked)."""

from __future__ import annotations

import pytest

from ipybox_core.kernel import Deadline
from ipybox_core.kernel import _timeout_guard as guard_module
from ipybox_core.kernel import deadline as deadline_module
from ipybox_core.kernel._timeout_guard import TimeoutGuard


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    now = [100.0]
    # Both modules read the same time.monotonic.
    monkeypatch.setattr(f"{deadline_module.__name__}.time.monotonic", lambda: now[0])
    monkeypatch.setattr(f"{guard_module.__name__}.time.monotonic", lambda: now[0])
    return now


def test_no_deadline_never_interrupts() -> None:
    calls: list[int] = []
    guard = TimeoutGuard(None, grace=1.0, interrupt=lambda: calls.append(1))
    guard.code_started()
    assert guard.check() is False
    assert not guard.timed_out and calls == []
    assert guard.wait_time(0.1) == 0.1


def test_interrupts_only_once_the_code_runs_then_repeatedly(clock: list[float]) -> None:
    calls: list[float] = []
    guard = TimeoutGuard(Deadline(1.0), grace=2.0, interrupt=lambda: calls.append(clock[0]))
    assert guard.wait_time(0.5) == pytest.approx(0.5)
    clock[0] += 1.5
    assert guard.check() is False
    assert guard.timed_out
    assert calls == [], "no signal while ipykernel may still be dispatching the request"
    guard.code_started()
    assert calls == [101.5]
    clock[0] += 0.3
    guard.check()
    assert calls == [101.5], "repeats every quarter of the grace period (0.5 s)"
    clock[0] += 0.3
    guard.check()
    assert calls == [101.5, 102.1]
    clock[0] += 1.5
    assert guard.check() is True, "grace is over 2 s after expiry"


def test_grace_runs_even_if_the_code_never_starts(clock: list[float]) -> None:
    guard = TimeoutGuard(Deadline(0.0), grace=1.0, interrupt=lambda: None)
    assert guard.check() is False
    clock[0] += 1.1
    assert guard.check() is True
