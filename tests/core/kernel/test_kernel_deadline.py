"""Deadline: a pausable time budget (time is faked, no sleeping)."""

from __future__ import annotations

import pytest

from ipybox_core.kernel import Deadline
from ipybox_core.kernel import deadline as deadline_module


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    now = [1000.0]
    monkeypatch.setattr(f"{deadline_module.__name__}.time.monotonic", lambda: now[0])
    return now


def test_counts_down_and_expires(clock: list[float]) -> None:
    deadline = Deadline(10)
    clock[0] += 4
    assert deadline.remaining() == pytest.approx(6)
    assert not deadline.expired
    clock[0] += 7
    assert deadline.remaining() == 0
    assert deadline.expired


def test_paused_time_does_not_count(clock: list[float]) -> None:
    deadline = Deadline(10)
    clock[0] += 2
    deadline.pause()
    clock[0] += 100
    assert deadline.paused
    assert deadline.remaining() == pytest.approx(8)
    deadline.resume()
    clock[0] += 3
    assert deadline.remaining() == pytest.approx(5)
    assert deadline.elapsed() == pytest.approx(5)


def test_pauses_nest(clock: list[float]) -> None:
    deadline = Deadline(10)
    deadline.pause()
    deadline.pause()
    deadline.resume()
    clock[0] += 50
    assert deadline.remaining() == pytest.approx(10), "still paused by the first pause()"
    deadline.resume()
    clock[0] += 1
    assert deadline.remaining() == pytest.approx(9)


def test_misuse_is_rejected() -> None:
    with pytest.raises(ValueError, match="non-negative"):
        Deadline(-1)
    with pytest.raises(RuntimeError, match="without a matching pause"):
        Deadline(1).resume()
