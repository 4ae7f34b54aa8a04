"""The approvals inbox: what waits across the service's conversations, and answers to it.

The service knows every parked execution (:attr:`IpyboxService.parked`): ``list_approvals`` lists
them (:func:`waiting`). ``answer_approval`` (:func:`answer`) decides one as ``client:<name>`` and
continues its execution in the service at once, to its next stop (a result, or the next approval,
which is parked and listed again). The outcome waits in :class:`AnsweredCalls` for the call's next
round: a resume of the call (``reattach``, from any process) or the answer of the client that was
asked, which then gets the outcome instead of having its own answer applied. So the call runs once,
and its result reaches the conversation either way.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from mcp_types import CallToolResult, InputRequiredResult, TextContent

from ipybox_core import protocol
from ipybox_core.errors import ApprovalError, ExecutionGone, IpyboxError
from ipybox_core.mcp_server._parked import cancel_execution
from ipybox_core.mcp_server._results import error_result, failure_result
from ipybox_core.mcp_server.approvals import Answer, apply_answer

if TYPE_CHECKING:
    from ipybox_core.executor import Execution
    from ipybox_core.mcp_server._suspended import SuspendedExecution
    from ipybox_core.mcp_server.service import IpyboxService, ParkedCall

Round = CallToolResult | InputRequiredResult
NAMED = "named:"
APPROVAL_KEY = "approval:"
"""Prefix of an approval id in the remembered decisions (beside the request states)."""
_SHORTEST_PREFIX = 8


def conversation_of(session: str | None) -> str:
    """The conversation key a client knows for service session ``session``."""
    if session is None:
        return "default"
    return session.removeprefix(NAMED)


def waiting(service: IpyboxService, conversation: str | None = None) -> list[protocol.WaitingApproval]:
    """The approvals that wait in the service (in ``conversation`` only, when given), oldest first."""
    now = time.time()
    found = []
    for parked in service.parked.values():
        request = parked.request
        where = conversation_of(parked.context.session)
        if request is None or not request.pending or (conversation is not None and where != conversation):
            continue
        found.append(
            protocol.WaitingApproval(
                id=request.id,
                conversation=where,
                call_id=parked.context.call,
                kind=request.kind,
                server=request.server,
                tool=request.tool,
                arguments=request.args,
                read_only=bool(request.annotations.read_only_hint),
                hints=tuple(request.hints),
                asked_at=request.created_at,
                asked_by=parked.context.client,
                waiting_for=max(now - request.created_at, 0.0),
            )
        )
    return found


@dataclass(eq=False)
class AnsweredCall:
    """An execution answered from the inbox, continuing (or done) until its call's next round."""

    session: str | None
    call: str | None
    states: set[str]
    """The request states it was parked under (a client's answer to one of them gets the outcome)."""
    answers: list[dict[str, Any]]
    """The inbox's decisions, as data (``ipybox.dev/answered``)."""
    execution: Execution
    outcome: asyncio.Task[Round]
    timer: asyncio.TimerHandle | None = field(default=None, repr=False)


class AnsweredCalls:
    """The outcomes of inbox-answered executions that no round of their call has taken yet; one
    nobody takes is dropped after ``keep_for`` seconds (the execution is cancelled if it still runs)."""

    def __init__(self, keep_for: float) -> None:
        self.keep_for = keep_for
        self._calls: list[AnsweredCall] = []

    def add(self, answered: AnsweredCall) -> None:
        """Keep ``answered``; an earlier one of the same call (whose next stop it was) is merged in."""
        for older in [c for c in self._calls if _same_call(c, answered.session, answered.call)]:
            self._forget(older)
            answered.states |= older.states
            answered.answers[:0] = older.answers
        self._keep(answered)

    def take(
        self, session: str | None, *, state: str | None = None, call: str | None = None
    ) -> AnsweredCall | None:
        """The answered execution of ``session`` parked under ``state`` or started as ``call``, removed."""
        for answered in reversed(self._calls):
            if answered.session == session and (
                (state is not None and state in answered.states) or _same_call(answered, session, call)
            ):
                self._forget(answered)
                return answered
        return None

    def put_back(self, answered: AnsweredCall) -> None:
        """Keep ``answered`` again (the round that took it went away before its outcome)."""
        self._keep(answered)

    def _keep(self, answered: AnsweredCall) -> None:
        answered.timer = asyncio.get_running_loop().call_later(self.keep_for, self._expire, answered)
        self._calls.append(answered)

    async def cancel_all(self, reason: str, where: Callable[[AnsweredCall], bool], decided_by: str) -> int:
        """Drop those ``where`` selects, cancelling their executions that still run or wait;
        returns how many still ran or waited."""
        chosen = [answered for answered in self._calls if where(answered)]
        running = 0
        for answered in chosen:
            self._forget(answered)
            if not answered.execution.done:
                running += 1
                with contextlib.suppress(Exception):
                    await cancel_execution(answered.execution, reason, decided_by)
            answered.outcome.cancel()
        return running

    def _forget(self, answered: AnsweredCall) -> None:
        with contextlib.suppress(ValueError):
            self._calls.remove(answered)
        if answered.timer is not None:
            answered.timer.cancel()

    def _expire(self, answered: AnsweredCall) -> None:
        if answered in self._calls:
            self._forget(answered)
            answered.outcome.cancel()  # its drive cancels the execution if it still runs


def _same_call(answered: AnsweredCall, session: str | None, call: str | None) -> bool:
    return call is not None and answered.session == session and answered.call == call


def find(service: IpyboxService, approval_id: str) -> SuspendedExecution[ParkedCall] | None:
    """The parked execution whose pending approval is ``approval_id`` (or a unique prefix of it,
    at least 8 characters)."""
    matches = [
        parked
        for parked in service.parked.values()
        if parked.request is not None
        and parked.request.pending
        and (
            parked.request.id == approval_id
            or (len(approval_id) >= _SHORTEST_PREFIX and parked.request.id.startswith(approval_id))
        )
    ]
    exact = [parked for parked in matches if parked.request is not None and parked.request.id == approval_id]
    return (exact or matches)[0] if len(exact or matches) == 1 else None


async def answer(
    service: IpyboxService,
    remember: Callable[[str, str], None],
    who: Callable[[str], str | None],
    drive: Callable[[Execution, ParkedCall], Any],
    *,
    approval_id: str,
    reply: Answer,
    decided_by: str,
    caller_session: str | None,
) -> protocol.WaitingApproval:
    """Decide the waiting approval ``approval_id`` as ``decided_by``, and continue its execution
    (``drive`` runs it to its next stop); returns the approval as it was listed.

    Raises:
        ApprovalError: it was answered already (``decided_by`` names who answered first), or it
            waits in the caller's own conversation.
        ExecutionGone: no approval waits under that id.
    """
    parked = find(service, approval_id)
    if parked is None:
        first = who(APPROVAL_KEY + approval_id)
        if first is not None:
            raise ApprovalError(f"approval {approval_id} was already answered by {first}", decided_by=first)
        raise ExecutionGone(
            f"no approval {approval_id} waits in the service (it was answered, expired or cancelled, "
            "or the service restarted); list what waits with list_approvals"
        )
    request = parked.request
    assert request is not None
    if parked.context.session == caller_session:
        raise ApprovalError(
            "an approval cannot be answered from the inbox by its own conversation: the code would "
            "approve its own call"
        )
    listed = next(item for item in waiting(service) if item.id == request.id)
    service.parked.take(parked.key)
    remember(parked.key, decided_by)
    remember(APPROVAL_KEY + request.id, decided_by)
    await apply_answer(request, reply, decided_by=decided_by)
    decision = request.decision
    answers = [
        {
            "id": request.id,
            "approved": bool(decision and decision.approved),
            "decided_by": decided_by,
            "reason": decision.reason if decision is not None else None,
        }
    ]
    context = parked.context
    outcome: asyncio.Task[Round] = asyncio.ensure_future(drive(parked.execution, context))
    outcome.add_done_callback(lambda task: task.cancelled() or task.exception())
    service.answered.add(
        AnsweredCall(context.session, context.call, {parked.key}, answers, parked.execution, outcome)
    )
    return listed


async def outcome_of(answered: AnsweredCall, service: IpyboxService, *, overtook: bool) -> Round:
    """The round that hands ``answered``'s outcome to the client: its next stop, with the inbox's
    decisions (``ipybox.dev/answered``); ``overtook``: the client's own answer was not applied (it
    is told so before the result)."""
    try:
        result = await asyncio.shield(answered.outcome)
    except asyncio.CancelledError:
        if answered.outcome.cancelled():
            raise
        service.answered.put_back(answered)  # this round went away: the next one takes it
        raise
    except IpyboxError as error:
        result = failure_result(error)
    if isinstance(result, InputRequiredResult) and (result.request_state or "") not in service.parked:
        result = error_result("gone", protocol.GONE_MESSAGE)  # its next question expired or was cancelled
    result.meta = {**(result.meta or {}), protocol.ANSWERED: answered.answers}
    if overtook and isinstance(result, CallToolResult):
        last = answered.answers[-1]
        what = "approved" if last["approved"] else f"rejected: {last['reason']}"
        notice = protocol.ANSWERED_ELSEWHERE_MESSAGE.format(who=last["decided_by"], what=what)
        result.content.insert(0, TextContent(type="text", text=notice))
        previous = protocol.meta_value(result.meta, protocol.NOTICE)
        result.meta[protocol.NOTICE] = f"{notice}\n\n{previous}" if isinstance(previous, str) else notice
    return result
