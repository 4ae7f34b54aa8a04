"""What every kernel backend sends and reports the same way: the execute request, the final event,
the timeout errors, the busy check."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

from ipybox_core.errors import ExecutionTimeout, ExecutorBusy, KernelStartError
from ipybox_core.kernel.deadline import Deadline
from ipybox_core.kernel.events import ExecutionFinished


def execute_request(code: str, silent: bool) -> dict[str, Any]:
    """The content of an ``execute_request``."""
    return {
        "code": code,
        "silent": silent,
        "store_history": not silent,
        "user_expressions": {},
        "allow_stdin": False,
        "stop_on_error": False,
    }


def finished_event(reply: dict[str, Any], started: float) -> ExecutionFinished:
    """The last event of an execution, from its ``execute_reply``."""
    status = reply.get("status", "error")
    return ExecutionFinished(
        status=status if status in ("ok", "error", "aborted") else "error",
        execution_count=reply.get("execution_count"),
        duration=time.monotonic() - started,
    )


def interrupted_timeout(deadline: Deadline) -> ExecutionTimeout:
    """The error of an execution that timed out and was interrupted (state kept)."""
    return ExecutionTimeout(
        f"the code ran longer than its {deadline.describe()} and was interrupted; the kernel's state is kept",
        timeout=deadline.limit,
    )


async def timeout_by_restart(
    deadline: Deadline,
    grace: float,
    restart: Callable[[], Awaitable[None]],
    failures: tuple[type[Exception], ...] = (KernelStartError,),
) -> ExecutionTimeout:
    """Restart a kernel that ignored a timeout's interrupts; the error that says so."""
    message = (
        f"the code ran longer than its {deadline.describe()} and did not react to an "
        f"interrupt within {grace:g} s (stuck in native code?); the kernel was restarted and all "
        "its state is lost"
    )
    try:
        await restart()
    except failures as exc:
        message += f" (the restart failed: {exc})"
    return ExecutionTimeout(message, timeout=deadline.limit)


async def wait_until_not_busy(busy: Callable[[], bool]) -> None:
    """Raise :class:`ExecutorBusy` unless the running execution ends within a few loop turns.

    An iterator abandoned without ``aclose()`` is finalised by the event loop a moment later.
    """
    for _ in range(5):
        if not busy():
            return
        await asyncio.sleep(0)
    raise ExecutorBusy("the kernel is already running an execution")
