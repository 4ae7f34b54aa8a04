"""Which calls an adapter instance left waiting for a decision: for its count, its cancel and its timer.

The executions themselves wait in their executors, found again by call id from any adapter
instance (:func:`found_again`; :func:`not_waiting` says why one is not there any more); an adapter
only remembers *which* calls it left there, so that ``suspended`` counts them,
``cancel_suspended()`` cancels them and an ``abandon_after`` the application asked for cancels one
nobody came back for.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection
from dataclasses import dataclass

from ipybox_core import protocol
from ipybox_core.approval import ApprovalRequest
from ipybox_core.errors import IpyboxError
from ipybox_core.executor import Execution, ExecutionResult
from ipybox_core.executor.contract import Executor, SessionSource
from ipybox_integrations._session import cancel_waiting

ABANDONED = "abandoned: nobody decided this call within {delay:g} s (the adapter's abandon_after)"


async def found_again(
    executor: Executor, call_id: str
) -> tuple[Execution, ApprovalRequest | ExecutionResult] | None:
    """The execution of ``call_id`` still in its executor (left by any adapter instance; over an
    ipybox service by any process) and where it stands: the question it waits on, or its result
    when it finished meanwhile; ``None`` when there is none. Raises what reattaching and advancing
    raise (``ServiceError``, ``ExecutionCancelled``, ...)."""
    execution = await executor.reattach(call_id)
    return None if execution is None else (execution, await execution.next_stop())


def ended_text(error: BaseException) -> str:
    """The model's words for a call whose execution ended as ``error`` while it waited (cancelled
    and why, timed out, its kernel died, gone)."""
    return protocol.failure_text(protocol.gone_because(error))


async def not_waiting(executor: Executor, call_id: str) -> str:
    """What the model is told when nothing waits for ``call_id`` any more (after
    :func:`found_again` or ``reattach`` found nothing): its true cause when its executor knows it
    (cancelled and why, expired, answered first by whom, the service restarted), else every
    possible cause (:data:`~ipybox_core.protocol.NOT_WAITING_MESSAGE`)."""
    try:
        gone = await executor.ended(call_id)
    except IpyboxError:
        gone = None
    return protocol.NOT_WAITING_MESSAGE if gone is None else protocol.failure_text(gone)


@dataclass(frozen=True)
class _Left:
    timer: asyncio.TimerHandle | None
    run: str | None


class WaitingCalls:
    """``(conversation, call id)`` of the calls left waiting, oldest first."""

    def __init__(self, source: SessionSource, *, abandon_after: float | None) -> None:
        self.source = source
        self.abandon_after = abandon_after
        """The adapter's own backstop in seconds (``None``: the executor's or the service's applies)."""
        self._calls: dict[tuple[str, str], _Left] = {}
        self._abandoning: set[asyncio.Future[int]] = set()

    def __len__(self) -> int:
        return len(self._calls)

    def left(self, conversation: str, call_id: str, *, run: str | None = None) -> None:
        """``call_id`` of ``conversation`` waits for a decision (restarts its timer); ``run``: the
        framework's run that left it (see :meth:`cancel`)."""
        self.resumed(conversation, call_id)
        timer = None
        if self.abandon_after is not None:
            loop = asyncio.get_running_loop()
            timer = loop.call_later(self.abandon_after, self._abandon, conversation, call_id)
        self._calls[(conversation, call_id)] = _Left(timer, run)

    def resumed(self, conversation: str, call_id: str) -> bool:
        """``call_id`` of ``conversation`` was picked up again (or ended): forget it; whether it
        was left waiting."""
        left = self._calls.pop((conversation, call_id), None)
        if left is not None and left.timer is not None:
            left.timer.cancel()
        return left is not None

    def of(self, conversation: str) -> list[str]:
        """The call ids of ``conversation`` left waiting, oldest first."""
        return [call_id for key, call_id in self._calls if key == conversation]

    def forget(self, conversation: str | None = None, *, run: str | None = None) -> list[tuple[str, str]]:
        """Forget the calls of ``conversation`` (all when ``None``), only those ``run`` left if
        given; returns them."""
        chosen = [
            key
            for key, left in self._calls.items()
            if (conversation is None or key[0] == conversation) and (run is None or left.run == run)
        ]
        for key in chosen:
            self.resumed(*key)
        return chosen

    async def cancel(
        self, reason: str | None, *, conversation: str | None = None, run: str | None = None
    ) -> int:
        """Cancel the calls left waiting (those of ``conversation``, those ``run`` left, if given)
        in their executors; returns how many still waited there."""
        cancelled = 0
        for key, call_id in self.forget(conversation, run=run):
            cancelled += await cancel_waiting(self.source, key, calls=[call_id], reason=reason)
        return cancelled

    async def cancel_conversation(
        self,
        conversation: str,
        *,
        calls: Collection[str] | None = None,
        keep: Collection[str] = (),
        reason: str | None = None,
    ) -> int:
        """Cancel what waits in ``conversation``'s executor, whichever instance (over an ipybox
        service: whichever process) left it: only ``calls`` if given, never ``keep``; this
        instance forgets the same calls of its own. Returns how many still waited."""
        for call_id in self.of(conversation):
            if (calls is None or call_id in calls) and call_id not in keep:
                self.resumed(conversation, call_id)
        return await cancel_waiting(self.source, conversation, calls=calls, keep=keep, reason=reason)

    async def settle(self) -> None:
        """Wait until the calls abandoned by their timer so far are cancelled (the kernel is free)."""
        if self._abandoning:
            await asyncio.gather(*self._abandoning, return_exceptions=True)

    def _abandon(self, conversation: str, call_id: str) -> None:
        self._calls.pop((conversation, call_id), None)
        reason = ABANDONED.format(delay=self.abandon_after)
        cancelling = cancel_waiting(self.source, conversation, calls=[call_id], reason=reason)
        task = asyncio.ensure_future(cancelling)
        self._abandoning.add(task)
        task.add_done_callback(self._abandoning.discard)
