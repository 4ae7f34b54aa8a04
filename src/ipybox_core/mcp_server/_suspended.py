"""Executions the service parks while a client collects a decision between two rounds.

``execute_code`` over MCP returns an ``InputRequiredResult`` when an MCP call needs a decision; the
execution waits here under its client's key until the client comes back with the answer (from any
process), or until its timer, a move-on or the service's shutdown cancels it.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from types import EllipsisType
from typing import TYPE_CHECKING, Generic

from typing_extensions import TypeVar

if TYPE_CHECKING:
    from ipybox_core.approval import ApprovalRequest
    from ipybox_core.executor import Execution

ContextT = TypeVar("ContextT", default=None)
"""What the parker needs again on resume (e.g. the output limit of the original call)."""

ABANDONED = "the suspended execution was abandoned"


@dataclass
class SuspendedExecution(Generic[ContextT]):
    """An execution parked while a decision for ``request`` is collected."""

    key: str
    execution: Execution
    request: ApprovalRequest | None
    context: ContextT
    reason: str | None = None
    """Why it is cancelled if nobody comes back in time (``None``: the store's ``abandon_reason``)."""
    parked_at: float = field(default_factory=time.monotonic)
    timer: asyncio.TimerHandle | None = field(default=None, repr=False)


class SuspendedExecutions(Generic[ContextT]):
    """Parked executions by key (a tool call id, a thread + call id, a request state, ...).

    An execution left parked longer than ``abandon_after`` seconds (``None``: no timer; the service
    gives its approval timeout) is cancelled (the kernel is interrupted, pending
    approvals rejected) by a timer, so a caller that never comes back does not keep the executor
    busy; it is a backstop, callers cancel at once when they know the decision will not come.
    :meth:`cancel_all` cancels all of them. An execution that finished while
    parked (e.g. its approval timed out and the code went on) stays until it is taken, so its
    result still reaches the caller.
    """

    def __init__(self, *, abandon_after: float | None, abandon_reason: str = ABANDONED) -> None:
        self.abandon_after = abandon_after
        self.abandon_reason = abandon_reason
        self._parked: dict[str, SuspendedExecution[ContextT]] = {}
        self._expiring: set[asyncio.Future[None]] = set()

    def __contains__(self, key: str) -> bool:
        return key in self._parked

    def __len__(self) -> int:
        return len(self._parked)

    def get(self, key: str) -> SuspendedExecution[ContextT] | None:
        """The execution parked under ``key``, left in place."""
        return self._parked.get(key)

    def values(self) -> list[SuspendedExecution[ContextT]]:
        """Everything parked, oldest first."""
        return list(self._parked.values())

    def park(
        self,
        key: str,
        execution: Execution,
        request: ApprovalRequest | None,
        context: ContextT,
        *,
        abandon_after: float | EllipsisType | None = ...,
        reason: str | None = None,
    ) -> SuspendedExecution[ContextT]:
        """Park ``execution`` under ``key`` (replacing what was parked there; parking again restarts
        the abandonment timer). ``abandon_after`` and ``reason`` override the store's
        ``abandon_after`` and ``abandon_reason`` for this execution."""
        self._forget(key)
        parked = SuspendedExecution(key, execution, request, context, reason)
        delay = self.abandon_after if isinstance(abandon_after, EllipsisType) else abandon_after
        if delay is not None:
            parked.timer = asyncio.get_running_loop().call_later(delay, self._start_expiry, parked)
        self._parked[key] = parked
        return parked

    def take(self, key: str) -> SuspendedExecution[ContextT] | None:
        """Remove and return the execution parked under ``key`` (``None`` if there is none)."""
        return self._forget(key)

    async def cancel(self, key: str, reason: str | None = None) -> bool:
        """Cancel the execution parked under ``key``; False if there was none."""
        return bool(await self.cancel_all(reason, where=lambda parked: parked.key == key))

    async def cancel_all(
        self,
        reason: str | None = None,
        *,
        where: Callable[[SuspendedExecution[ContextT]], bool] | None = None,
    ) -> int:
        """Cancel every parked execution, or those ``where`` selects (``reason`` goes to their
        pending approvals); returns how many."""
        chosen = [item for item in self._parked.values() if where is None or where(item)]
        for item in chosen:
            self._forget(item.key)
        for item in chosen:
            with contextlib.suppress(Exception):
                await item.execution.cancel(reason or self.abandon_reason)
        return len(chosen)

    async def settle(self) -> None:
        """Wait until the executions abandoned by their timer so far are cancelled (the kernel is free)."""
        if self._expiring:
            await asyncio.gather(*self._expiring, return_exceptions=True)

    def _start_expiry(self, parked: SuspendedExecution[ContextT]) -> None:
        expiry = asyncio.ensure_future(self._expire(parked))
        self._expiring.add(expiry)
        expiry.add_done_callback(self._expiring.discard)

    def _forget(self, key: str) -> SuspendedExecution[ContextT] | None:
        parked = self._parked.pop(key, None)
        if parked is not None and parked.timer is not None:
            parked.timer.cancel()
        return parked

    async def _expire(self, parked: SuspendedExecution[ContextT]) -> None:
        if self._parked.get(parked.key) is not parked:
            return  # taken (or replaced) meanwhile
        del self._parked[parked.key]
        if not parked.execution.done:
            with contextlib.suppress(Exception):
                await parked.execution.cancel(parked.reason or self.abandon_reason)
