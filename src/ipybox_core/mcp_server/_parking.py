"""Executions parked between the rounds of a 2026-07-28 ``InputRequiredResult`` exchange."""

from __future__ import annotations

import contextlib
import secrets
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ipybox_core.approval import ApprovalRequest

if TYPE_CHECKING:
    from ipybox_core.executor import Execution


@dataclass
class ParkedExecution:
    """An execution waiting for the client to come back with the answer to ``request``."""

    key: str
    execution: Execution
    request: ApprovalRequest
    max_chars: int
    parked_at: float = field(default_factory=time.monotonic)


class ParkedExecutions:
    """Parked executions by key (the ``requestState`` the client echoes back).

    Unlike a framework's suspended-execution registry, a parked execution that finished meanwhile
    (its approval timed out) is kept until taken, so the client still gets its result. Executions
    parked longer than ``abandon_after`` seconds are cancelled by :meth:`sweep`.
    """

    def __init__(self, *, abandon_after: float) -> None:
        self.abandon_after = abandon_after
        self._parked: dict[str, ParkedExecution] = {}

    def __len__(self) -> int:
        return len(self._parked)

    def park(self, execution: Execution, request: ApprovalRequest, max_chars: int) -> ParkedExecution:
        key = secrets.token_urlsafe(16)
        parked = ParkedExecution(key=key, execution=execution, request=request, max_chars=max_chars)
        self._parked[key] = parked
        return parked

    def take(self, key: str) -> ParkedExecution | None:
        return self._parked.pop(key, None)

    async def sweep(self) -> int:
        """Cancel executions parked for longer than ``abandon_after``; returns how many."""
        now = time.monotonic()
        expired = [p for p in self._parked.values() if now - p.parked_at > self.abandon_after]
        for parked in expired:
            del self._parked[parked.key]
            with contextlib.suppress(Exception):
                await parked.execution.cancel("nobody answered the approval request in time")
        return len(expired)

    async def cancel_all(self, reason: str) -> None:
        parked, self._parked = list(self._parked.values()), {}
        for item in parked:
            with contextlib.suppress(Exception):
                await item.execution.cancel(reason)
