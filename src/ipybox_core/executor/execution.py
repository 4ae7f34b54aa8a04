"""One running piece of code: an async iterator of events that can be paused for approvals and cancelled."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from types import TracebackType
from typing import Literal, overload

from ipybox_core.approval import ApprovalDecision, ApprovalRequest
from ipybox_core.errors import ExecutionCancelled
from ipybox_core.executor.events import ExecutionEvent, ExecutionResult
from ipybox_core.mcp.elicitation import ElicitationRequest
from ipybox_core.protocol import CANCELLED_BY_APP

Emit = Callable[[ExecutionEvent], None]
Driver = Callable[[Emit], Awaitable[ExecutionResult]]


@dataclass(frozen=True)
class _Failed:
    error: BaseException


class _End:
    pass


_END = _End()

WENT_ON = "the execution's consumer asked for its next event without answering"
NOT_A_STOP = "next_stop() does not hand out questions (next_stop(questions=True) does)"
ENDED = "the execution ended before anyone answered"


class Execution:
    """Events of one execution, in order: output chunks, displays, approval requests, MCP servers'
    questions (:class:`~ipybox_core.mcp.elicitation.ElicitationRequest`) and tool calls as they
    happen, then one :class:`ExecutionResult` (or the raised :class:`ExecutionTimeout`,
    :class:`KernelDied` or :class:`ExecutionCancelled`).

    A question is answered before the consumer asks for the next event: one left open then (a
    consumer that does not know questions), or when the execution ends or is cancelled, is
    declined, so the server's call goes on.

    The code runs in a background task from the first iteration on, so kernel output is consumed
    even while the application thinks about an approval. Iterate it with ``async for``; use it as
    an async context manager (or call :meth:`cancel`) to make sure an abandoned execution is
    interrupted.
    """

    def __init__(
        self,
        driver: Driver,
        on_finish: Callable[[Execution], None],
        cancel_kernel: Callable[[], Awaitable[None]],
    ) -> None:
        self._driver = driver
        self._on_finish = on_finish
        self._cancel_kernel = cancel_kernel
        self._queue: asyncio.Queue[ExecutionEvent | _Failed | _End] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None
        self._pending: list[ApprovalRequest] = []
        self._questions: list[ElicitationRequest] = []
        self._handed: list[ElicitationRequest] = []  # questions handed out, answered before the next event
        self._exhausted = False
        self._delivered = False  # the result (or the failure) was handed out
        self._cancelled: str | None = None  # the reason, once cancelled
        self._done_callbacks: list[Callable[[Execution], None]] = []
        self.result: ExecutionResult | None = None
        """The final result, once the execution finished successfully."""
        self.error: BaseException | None = None
        """What the execution ended with when it failed (``ExecutionCancelled``, ``ExecutionTimeout``,
        ``KernelDied``, ...), once it did."""
        self.last_decision: ApprovalDecision | None = None
        """The decision of the approval request of this execution decided last (who answered it)."""
        self.before_call: Callable[[ApprovalRequest], str | Awaitable[str | None] | None] | None = None
        """Consulted for each call of the code (MCP, host tool, shell) before the approval policy
        decides it: a returned reason refuses the call before anyone is asked or anything is sent
        (the code sees ``PermissionError`` with the reason; its :class:`ToolCall` event is decided by
        ``"before-call"``), e.g. to enforce a limit on calls. Set it (or change it) at any time;
        over ``RemoteSessions`` (an ipybox service) the service asks it in a round of its own
        before its policy decides each call."""

    # --- iteration --------------------------------------------------------------------------

    def __aiter__(self) -> Execution:
        return self

    async def __anext__(self) -> ExecutionEvent:
        if self._exhausted:
            raise StopAsyncIteration
        self.start()
        handed, self._handed = self._handed, []
        for question in handed:  # the consumer went on without answering
            question.decline_unanswered(WENT_ON)
        item = await self._queue.get()
        if isinstance(item, _End):
            self._exhausted = True
            raise StopAsyncIteration
        if isinstance(item, _Failed):
            self._exhausted = self._delivered = True
            raise item.error
        if isinstance(item, ExecutionResult):
            self._delivered = True
        elif isinstance(item, ElicitationRequest):
            self._handed.append(item)
        return item

    async def __aenter__(self) -> Execution:
        self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if not self.done:
            await self.cancel()

    # --- state ------------------------------------------------------------------------------

    def start(self) -> None:
        """Start running the code (iteration starts it implicitly)."""
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="ipybox-execution")

    @property
    def done(self) -> bool:
        """True once the code finished, failed or was cancelled."""
        return self._task is not None and self._task.done()

    def add_done_callback(self, callback: Callable[[Execution], None]) -> None:
        """Call ``callback(execution)`` once the code finished, failed or was cancelled (at once if
        it already did)."""
        if self.done or (self._task is None and self._exhausted):
            callback(self)
            return
        self._done_callbacks.append(callback)

    @property
    def delivered(self) -> bool:
        """True once the result (or the error it ended with) was handed out to a consumer."""
        return self._delivered

    @property
    def pending_approvals(self) -> list[ApprovalRequest]:
        """Approval requests of this execution that still wait for a decision."""
        return [request for request in self._pending if request.pending]

    @property
    def pending_questions(self) -> list[ElicitationRequest]:
        """MCP servers' questions of this execution that still wait for an answer."""
        return [question for question in self._questions if question.pending]

    def resurface(self) -> None:
        """Hand out the pending approval requests and questions again, before any event still
        queued: for a new consumer that picks up an execution whose earlier consumer stopped at one."""
        queued: list[ExecutionEvent | _Failed | _End] = []
        while not self._queue.empty():
            item = self._queue.get_nowait()
            if not isinstance(item, (ApprovalRequest, ElicitationRequest)) or item.pending:
                queued.append(item)  # (a question decided meanwhile is no stop any more)
        self._handed = []
        waiting: list[ApprovalRequest | ElicitationRequest] = [
            *self.pending_approvals,
            *self.pending_questions,
        ]
        again = [request for request in waiting if not any(request is item for item in queued)]
        for item in [*again, *queued]:
            self._queue.put_nowait(item)

    @overload
    async def next_stop(self) -> ApprovalRequest | ExecutionResult: ...
    @overload
    async def next_stop(self, *, questions: Literal[False]) -> ApprovalRequest | ExecutionResult: ...
    @overload
    async def next_stop(
        self, *, questions: Literal[True]
    ) -> ApprovalRequest | ElicitationRequest | ExecutionResult: ...
    async def next_stop(
        self, *, questions: bool = False
    ) -> ApprovalRequest | ElicitationRequest | ExecutionResult:
        """Run until the code needs a decision or finishes (output events are skipped).

        An MCP server's question is a stop with ``questions=True``; otherwise it is declined.
        Raises what iteration raises (``ExecutionTimeout``, ``KernelDied``, ``ExecutionCancelled``).
        """
        async for event in self:
            if isinstance(event, (ApprovalRequest, ExecutionResult)):
                return event
            if isinstance(event, ElicitationRequest):
                if questions:
                    return event
                event.decline_unanswered(NOT_A_STOP)
        raise RuntimeError("the execution ended without a result")

    async def wait(self) -> ExecutionResult:
        """Run to the end without consuming events; raises like iteration would."""
        self.start()
        assert self._task is not None
        await asyncio.shield(self._task)
        result: ExecutionResult | None = None
        while not self._queue.empty():
            item = self._queue.get_nowait()
            if isinstance(item, _Failed):
                self._exhausted = self._delivered = True
                raise item.error
            if isinstance(item, ExecutionResult):
                result = item
        self._exhausted = self._delivered = True
        if result is None:
            raise RuntimeError("the execution ended without a result")
        return result

    async def cancel(self, reason: str = CANCELLED_BY_APP) -> None:
        """Interrupt the code, reject its pending approvals (``reason`` is their rejection's, and the
        :class:`ExecutionCancelled` message) and wait until the kernel is idle."""
        if self._task is None:
            self._exhausted = True
            self.error = ExecutionCancelled(reason)
            self._on_finish(self)
            self._call_done_callbacks()
            return
        if self._task.done():
            return
        self._cancelled = reason
        for request in self.pending_approvals:
            with contextlib.suppress(Exception):
                await request.reject(reason)
        for question in self.pending_questions:
            question.decline_unanswered(f"the execution was cancelled ({reason})")
        await self._cancel_kernel()
        with contextlib.suppress(BaseException):
            await asyncio.shield(self._task)

    # --- driver side ------------------------------------------------------------------------

    def _emit(self, event: ExecutionEvent) -> None:
        if isinstance(event, ApprovalRequest):
            self._pending = [*self.pending_approvals, event]
            event.add_done_callback(self._decided)
        elif isinstance(event, ElicitationRequest):
            self._questions = [*self.pending_questions, event]
        self._queue.put_nowait(event)

    def _decided(self, request: ApprovalRequest) -> None:
        if request.decision is not None:
            self.last_decision = request.decision

    async def _run(self) -> None:
        try:
            result = await self._driver(self._emit)
        except BaseException as error:
            self.error = error
            self._queue.put_nowait(_Failed(error))
            if not isinstance(error, Exception):
                raise
        else:
            if self._cancelled is not None:
                self.error = ExecutionCancelled(self._cancelled)
                self._queue.put_nowait(_Failed(self.error))
            else:
                self.result = result
                self._queue.put_nowait(result)
        finally:
            for question in self.pending_questions:
                question.decline_unanswered(ENDED)
            self._queue.put_nowait(_END)
            self._on_finish(self)
            self._call_done_callbacks()

    def _call_done_callbacks(self) -> None:
        callbacks, self._done_callbacks = self._done_callbacks, []
        for callback in callbacks:
            callback(self)
