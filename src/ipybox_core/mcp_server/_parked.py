"""The service's parked executions: each one cancelled names who or what dropped its pending calls.

A parked execution's pending approvals are rejected before the execution is cancelled, with the
decider the audit log records: ``moved-on`` (the conversation went on: ``cancel_waiting``, a reset,
the end of the session), ``shutdown`` (the service stops), ``timeout`` (abandoned by its timer), or
the client that cancelled it. :meth:`Execution.cancel` alone would record them as ``user``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import TYPE_CHECKING

from ipybox_core.approval.request import CONVERSATION_MOVED_ON, TIMEOUT, ApprovalDecision
from ipybox_core.errors import ApprovalError, ExecutionCancelled
from ipybox_core.mcp_server._suspended import ABANDONED, ContextT, SuspendedExecution, SuspendedExecutions
from ipybox_core.protocol import expired

if TYPE_CHECKING:
    from ipybox_core.executor import Execution


def reject_pending(execution: Execution, reason: str, decided_by: str) -> None:
    """Reject the approvals ``execution`` waits for, as decided by ``decided_by``."""
    for request in execution.pending_approvals:
        with contextlib.suppress(ApprovalError):  # decided meanwhile
            request.resolve(ApprovalDecision(approved=False, decided_by=decided_by, reason=reason))


async def cancel_execution(execution: Execution, reason: str, decided_by: str) -> None:
    """Cancel ``execution``, its pending approvals rejected as decided by ``decided_by``."""
    reject_pending(execution, reason, decided_by)
    await execution.cancel(reason)


class ParkedExecutions(SuspendedExecutions[ContextT]):
    """:class:`SuspendedExecutions` whose cancellations are audited with their decider;
    ``expired(parked, error)`` hears of each one its timer ended (why it ended: ``error``)."""

    def __init__(
        self,
        *,
        abandon_after: float | None,
        abandon_reason: str = ABANDONED,
        expired: Callable[[SuspendedExecution[ContextT], BaseException], None] | None = None,
    ) -> None:
        super().__init__(abandon_after=abandon_after, abandon_reason=abandon_reason)
        self._expired = expired

    async def cancel_all(
        self,
        reason: str | None = None,
        *,
        where: Callable[[SuspendedExecution[ContextT]], bool] | None = None,
        decided_by: str = CONVERSATION_MOVED_ON,
    ) -> int:
        """Cancel the parked executions ``where`` selects (all by default); their pending
        approvals are rejected with ``reason`` as decided by ``decided_by``."""
        for item in self.values():
            if where is None or where(item):
                reject_pending(item.execution, reason or self.abandon_reason, decided_by)
        return await super().cancel_all(reason, where=where)

    async def _expire(self, parked: SuspendedExecution[ContextT]) -> None:
        if self.get(parked.key) is parked:  # not taken meanwhile: nobody came back in time
            reason = parked.reason or self.abandon_reason
            reject_pending(parked.execution, reason, TIMEOUT)
            if self._expired is not None:
                self._expired(parked, _expiry(parked.execution, reason))
        await super()._expire(parked)


def _expiry(execution: Execution, reason: str) -> BaseException:
    """Why an execution its timer ended no longer waits: it expired (the code went on, or it is
    cancelled now), unless it ended otherwise first (timed out, its kernel died)."""
    if execution.done and execution.error is not None and not isinstance(execution.error, ExecutionCancelled):
        return execution.error
    return expired(reason)
