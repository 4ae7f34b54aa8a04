"""``execute_code``: run code, deciding its MCP calls through the MCP client, and report the result."""

from __future__ import annotations

import asyncio
import dataclasses
import re
import secrets
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mcp.server.mcpserver import Context
from mcp_types import CallToolResult, InputRequiredResult, TextContent

from ipybox_core import protocol
from ipybox_core.approval import ApprovalRequest
from ipybox_core.approval.request import CONVERSATION_MOVED_ON, SHUTDOWN, USER
from ipybox_core.errors import (
    ApprovalError,
    CodeError,
    ConfigError,
    ExecutionCancelled,
    ExecutionTimeout,
    ExecutorBusy,
    KernelDied,
)
from ipybox_core.mcp_server import inbox
from ipybox_core.mcp_server._output import OutputRelay
from ipybox_core.mcp_server._parked import cancel_execution
from ipybox_core.mcp_server._results import error_result, execution_result, failure_result
from ipybox_core.mcp_server._suspended import SuspendedExecution
from ipybox_core.mcp_server.approvals import Approver, answer_of, apply_answer
from ipybox_core.mcp_server.service import ClientSession, IpyboxService, ParkedCall

if TYPE_CHECKING:  # imported by the service in the background: keeps the handshake fast
    from ipybox_core.executor import Execution, ExecutionResult

BUSY_MESSAGE = protocol.BUSY_MESSAGE
GONE_MESSAGE = protocol.GONE_MESSAGE
_REMEMBERED_DECISIONS = 10_000


@dataclass(frozen=True)
class Caller:
    """Who makes a ``tools/call``: its session, its call id and its name (from ``_meta``)."""

    session: str | None
    call: str | None = None
    client: str | None = None

    @property
    def decided_by(self) -> str:
        return f"client:{self.client}" if self.client else USER


class Decisions:
    """The approvals answered lately (request state → who answered), to tell a late second answer
    that it lost instead of that the execution is gone."""

    def __init__(self) -> None:
        self._by_state: OrderedDict[str, str] = OrderedDict()

    def remember(self, state: str, decided_by: str) -> None:
        self._by_state[state] = decided_by
        while len(self._by_state) > _REMEMBERED_DECISIONS:
            self._by_state.popitem(last=False)

    def who(self, state: str) -> str | None:
        return self._by_state.get(state)


async def start(
    service: IpyboxService,
    approver: Approver,
    ctx: Context[Any, Any],
    session: ClientSession,
    caller: Caller,
    code: str,
    timeout: float | None,
    max_chars: int,
) -> CallToolResult | InputRequiredResult:
    """A fresh call: start ``code`` in ``session``'s kernel and run it to its first stop.

    A call id already parked in this session is not started again: its pending question is
    returned (the client lost the first answer, e.g. its process restarted).
    """
    if caller.call is not None:
        answered = service.answered.take(caller.session, call=caller.call)
        if answered is not None:  # answered from the inbox: its outcome, not a second run
            return await inbox.outcome_of(answered, service, overtook=False)
        if (parked := _parked_call(service, caller)) is not None:
            return _ask(approver, parked.key, parked.request)
    executor = session.executor
    assert executor is not None
    if executor.busy:
        return error_result("busy", BUSY_MESSAGE)
    try:  # the client's rules narrow the service's for this execution (never widen them)
        service.narrow(session, protocol.meta_value(ctx.request_context.meta, protocol.RULES))
    except ConfigError as error:
        return error_result("unavailable", f"Error: the client's approval rules are invalid: {error}")
    try:
        execution = executor.stream(code, timeout=timeout)
    except ExecutorBusy:
        return error_result("busy", BUSY_MESSAGE)
    call = ParkedCall(session.key, max_chars, caller.call, caller.client)
    result = await drive(service, approver, ctx, execution, call)
    if isinstance(result, CallToolResult) and (notice := session.take_restart_notice()) is not None:
        result.content.insert(0, TextContent(type="text", text=notice))
        result.meta = {**(result.meta or {}), protocol.NOTICE: notice}
    return result


async def resume_call(
    service: IpyboxService, approver: Approver, caller: Caller
) -> CallToolResult | InputRequiredResult:
    """The pending question of the call ``caller.call`` parked in ``caller.session`` (or, once the
    approvals inbox answered it, the execution's next stop); never runs code."""
    if caller.call is None:
        return error_result("gone", GONE_MESSAGE)
    answered = service.answered.take(caller.session, call=caller.call)
    if answered is not None:
        return await inbox.outcome_of(answered, service, overtook=False)
    parked = _parked_call(service, caller)
    if parked is None:
        return error_result("gone", GONE_MESSAGE)
    return _ask(approver, parked.key, parked.request)


async def resume(
    service: IpyboxService,
    approver: Approver,
    ctx: Context[Any, Any],
    caller: Caller,
    state: str,
    decisions: Decisions,
) -> CallToolResult | InputRequiredResult:
    """The client's retry of an ``InputRequiredResult``: apply the answer and continue the execution.

    Only the session that started the execution can resume it, and only one answer counts.
    """
    parked = service.parked.get(state)
    if parked is None or parked.context.session != caller.session:
        answered = service.answered.take(caller.session, state=state, call=caller.call)
        if answered is not None:  # the inbox answered first: this answer is not applied
            return await inbox.outcome_of(answered, service, overtook=True)
        winner = decisions.who(state) if parked is None else None
        if winner is not None:
            return failure_result(ApprovalError(f"already answered by {winner}", decided_by=winner))
        return error_result("gone", GONE_MESSAGE)
    service.parked.take(state)
    assert parked.request is not None  # parked only at an approval request
    decisions.remember(state, caller.decided_by)
    decisions.remember(inbox.APPROVAL_KEY + parked.request.id, caller.decided_by)
    responses = ctx.input_responses or {}
    answer = answer_of(responses.get(parked.key))
    if answer.cancel:
        await cancel_execution(
            parked.execution, answer.reason or "cancelled by the client", caller.decided_by
        )
    else:
        await apply_answer(parked.request, answer, decided_by=caller.decided_by)
    context = dataclasses.replace(parked.context, client=caller.client or parked.context.client)
    return await drive(service, approver, ctx, parked.execution, context)


async def drive(
    service: IpyboxService,
    approver: Approver,
    ctx: Context[Any, Any] | None,
    execution: Execution,
    call: ParkedCall,
) -> CallToolResult | InputRequiredResult:
    """Run ``execution`` until it ends, or until the client must be asked in a new round; its
    output goes to the client as it is printed (:class:`OutputRelay`). Without ``ctx`` (an
    execution the approvals inbox continued, no request to answer) every question is parked."""
    from ipybox_core.executor import ExecutionResult, OutputChunk  # loaded with the executor

    relay = OutputRelay(ctx, limit=call.max_chars)
    try:
        async for event in execution:
            if isinstance(event, OutputChunk):
                await relay.send(event)
            elif isinstance(event, ExecutionResult):
                event = _explain_missing_server(service, event)
                return await relay.finish(execution_result(event, max_chars=call.max_chars))
            elif isinstance(event, ApprovalRequest):
                channel = approver.channel(ctx) if ctx is not None else "input_required"
                if channel == "input_required":
                    parked = service.parked.park(secrets.token_urlsafe(16), execution, event, call)
                    return await relay.finish(_ask(approver, parked.key, event))
                assert ctx is not None
                await approver.decide_now(event, ctx, channel)
        raise RuntimeError("the execution ended without a result")
    except (ExecutionTimeout, KernelDied, ExecutionCancelled) as error:
        return await relay.finish(failure_result(error))
    except BaseException:
        # The request was cancelled or the connection lost: do not leave the code running.
        relay.close()
        decider = SHUTDOWN if service.closing else CONVERSATION_MOVED_ON
        await asyncio.shield(cancel_execution(execution, "the MCP request was cancelled", decider))
        raise


_NO_MODULE = re.compile(r"No module named '([\w.]+)'")


def _explain_missing_server(service: IpyboxService, result: ExecutionResult) -> ExecutionResult:
    """``ModuleNotFoundError`` for the API of a config server that failed to start: the error says
    that the server is not available, and why."""
    error = result.error
    if error is None or error.ename != "ModuleNotFoundError":
        return result
    match = _NO_MODULE.search(error.evalue)
    message = service.unavailable_message(match.group(1)) if match else None
    if message is None:
        return result
    explained = CodeError(error.ename, message, f"{error.traceback.rstrip()}\n\n{message}")
    return dataclasses.replace(result, error=explained)


def _parked_call(service: IpyboxService, caller: Caller) -> SuspendedExecution[ParkedCall] | None:
    return next(
        (
            parked
            for parked in service.parked.values()
            if parked.context.session == caller.session and parked.context.call == caller.call
        ),
        None,
    )


def _ask(approver: Approver, state: str, request: ApprovalRequest | None) -> InputRequiredResult:
    assert request is not None  # parked only at an approval request
    return InputRequiredResult(
        input_requests={state: approver.input_request(request)},
        request_state=state,
        _meta={protocol.APPROVAL: protocol.approval_data(request)},
    )
