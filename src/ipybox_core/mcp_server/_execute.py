"""``execute_code``: run code, deciding its MCP calls through the MCP client, and report the result."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import re
import secrets
from collections import OrderedDict
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mcp.server.mcpserver import Context
from mcp_types import (
    CallToolResult,
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitRequestURLParams,
    InputRequiredResult,
    TextContent,
)

from ipybox_core import protocol
from ipybox_core.approval import ApprovalRequest
from ipybox_core.approval.request import CONVERSATION_MOVED_ON, SHUTDOWN, USER
from ipybox_core.errors import (
    ApprovalError,
    CodeError,
    ConfigError,
    ExecutionCancelled,
    ExecutionGone,
    ExecutionTimeout,
    ExecutorBusy,
    KernelDied,
)
from ipybox_core.hosttools._wire import call_data
from ipybox_core.mcp_server import inbox
from ipybox_core.mcp_server._host_calls import HandedCall, HandedCheck, HandedQuestion, HostCalls
from ipybox_core.mcp_server._output import OutputRelay
from ipybox_core.mcp_server._parked import cancel_execution
from ipybox_core.mcp_server._results import error_result, execution_result, failure_result
from ipybox_core.mcp_server._suspended import SuspendedExecution
from ipybox_core.mcp_server.approvals import Approver, answer_of, apply_answer
from ipybox_core.mcp_server.service import ClientSession, IpyboxService, ParkedCall

if TYPE_CHECKING:  # imported by the service in the background: keeps the handshake fast
    from ipybox_core.executor import Execution, ExecutionResult
    from ipybox_core.executor.events import ExecutionEvent

Round = CallToolResult | InputRequiredResult

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
            return _handed(service, await inbox.outcome_of(answered, service, overtook=False), caller)
        if (parked := _parked_call(service, caller)) is not None:
            return await _again(service, approver, ctx, parked, caller)
    executor = session.executor
    assert executor is not None
    if executor.busy:
        return error_result("busy", BUSY_MESSAGE)
    meta = ctx.request_context.meta
    try:  # the client's rules narrow the service's for this execution (never widen them)
        service.narrow(session, protocol.meta_value(meta, protocol.RULES))
    except ConfigError as error:
        return error_result("unavailable", f"Error: the client's approval rules are invalid: {error}")
    host_tools = protocol.meta_value(meta, protocol.HOST_TOOLS)
    if host_tools is not None:
        try:
            await session.host_calls.serve(executor, host_tools, wait_for=service.settings.approval_timeout)
        except ConfigError as error:
            return error_result("unavailable", f"Error: the client's agent tools are invalid: {error}")
    try:
        execution = executor.stream(code, timeout=timeout)
    except ExecutorBusy:
        return error_result("busy", BUSY_MESSAGE)
    session.host_calls.watch(execution)
    _check_calls(service, meta, execution, session.host_calls)
    session.host_calls.questions = _takes_questions(meta)
    call = ParkedCall(session.key, max_chars, caller.call, caller.client, host_calls=session.host_calls)
    result = await drive(service, approver, ctx, execution, call)
    if isinstance(result, CallToolResult) and (notice := session.take_restart_notice()) is not None:
        result.content.insert(0, TextContent(type="text", text=notice))
        result.meta = {**(result.meta or {}), protocol.NOTICE: notice}
    return result


async def resume_call(
    service: IpyboxService, approver: Approver, ctx: Context[Any, Any], caller: Caller
) -> CallToolResult | InputRequiredResult:
    """The pending question of the call ``caller.call`` parked in ``caller.session`` (or, once the
    approvals inbox answered it, the execution's next stop); never starts code."""
    if caller.call is None:
        return error_result("gone", GONE_MESSAGE)
    answered = service.answered.take(caller.session, call=caller.call)
    if answered is not None:
        return _handed(service, await inbox.outcome_of(answered, service, overtook=False), caller)
    parked = _parked_call(service, caller)
    if parked is None:  # why, when the service knows (cancelled, expired, answered, restarted)
        return failure_result(service.gone(caller.session, caller.call))
    return await _again(service, approver, ctx, parked, caller)


async def _again(
    service: IpyboxService,
    approver: Approver,
    ctx: Context[Any, Any],
    parked: SuspendedExecution[ParkedCall],
    caller: Caller,
) -> CallToolResult | InputRequiredResult:
    """The question ``parked`` waits at, for a client that comes back to its call: an approval
    (asked again), an agent tool call nobody took (handed to this client), one another process
    took (it runs there: never twice), or one that failed meanwhile (the execution goes on)."""
    handed = parked.context.host_call
    if handed is None:
        return _ask(approver, parked.key, parked.request)
    takes = _takes_questions(ctx.request_context.meta)
    if parked.context.host_calls is not None:
        parked.context.host_calls.questions = takes
    if isinstance(handed, HandedQuestion) and not handed.settled and not takes:
        handed.fail(ValueError("the application process that picked the call up does not take questions"))
    if isinstance(handed, (HandedCheck, HandedQuestion)) and not handed.settled:  # asked again
        handed.hand_again(caller.client)
        return _ask_host(parked.key, handed)
    if not handed.handed and not handed.settled:
        handed.hand_to(caller.client)
        return _ask_host(parked.key, handed)
    if not handed.settled:
        who = f" ({handed.taker})" if handed.taker else ""
        return error_result(
            "busy",
            f"Error: the code's call of agent tool {handed.question.tool!r} runs in another application "
            f"process{who}; it runs only there. Ask again once it has answered.",
        )
    service.parked.take(parked.key)
    context = dataclasses.replace(
        parked.context, host_call=None, client=caller.client or parked.context.client
    )
    return await drive(service, approver, ctx, parked.execution, context)


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
            return _handed(service, await inbox.outcome_of(answered, service, overtook=True), caller)
        winner = decisions.who(state) if parked is None else None
        if winner is not None:
            return failure_result(ApprovalError(f"already answered by {winner}", decided_by=winner))
        return error_result("gone", GONE_MESSAGE)
    service.parked.take(state)
    decisions.remember(state, caller.decided_by)
    responses = ctx.input_responses or {}
    handed = parked.context.host_call
    context = dataclasses.replace(
        parked.context, host_call=None, client=caller.client or parked.context.client
    )
    answer = answer_of(responses.get(parked.key))
    _check_calls(service, ctx.request_context.meta, parked.execution, parked.context.host_calls)
    if parked.context.host_calls is not None:
        parked.context.host_calls.questions = _takes_questions(ctx.request_context.meta)
    if isinstance(handed, HandedQuestion) and not (answer.cancel and answer.action == "cancel"):
        handed.settle(responses.get(parked.key))  # the user's answer to an MCP server's question
    elif answer.cancel:
        service.record_ended(parked.context, ExecutionCancelled(answer.reason or "cancelled by the client"))
        await cancel_execution(
            parked.execution, answer.reason or "cancelled by the client", caller.decided_by
        )
    elif isinstance(handed, HandedCheck):  # the client's before-call check: allow or refuse
        handed.settle(_content(responses.get(parked.key)))
    elif handed is not None:  # the application ran the agent tool: its outcome
        handed.settle(answer.outcome)
    else:
        assert parked.request is not None  # parked at an approval request
        service.record_ended(parked.context, ApprovalError(decided_by=caller.decided_by))  # for a late one
        decisions.remember(inbox.APPROVAL_KEY + parked.request.id, caller.decided_by)
        await apply_answer(parked.request, answer, decided_by=caller.decided_by)
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
    from ipybox_core.executor import ExecutionResult, OutputChunk, ToolCall  # loaded with the executor
    from ipybox_core.mcp.elicitation import ElicitationRequest

    relay = OutputRelay(ctx, limit=call.max_chars)
    questions = call.host_calls is not None and call.host_calls.questions  # else declined (moving on)
    try:
        async for event in _stops(execution, call.host_calls):
            if isinstance(event, ElicitationRequest) and questions:
                event = HandedQuestion.of(event, service.settings.approval_timeout)  # the client answers
            if isinstance(event, HandedCall):  # an agent tool (the client runs it), a check, a question
                state = secrets.token_urlsafe(16)
                what = {HandedCheck: "checked", HandedQuestion: "answered"}.get(type(event), "ran")
                reason = f"nobody {what} the code's call of {event.question.tool!r} in time"
                context = dataclasses.replace(call, host_call=event)
                service.parked.park(state, execution, None, context, reason=reason)
                if ctx is not None:
                    event.hand_to(call.client)
                return await relay.finish(_ask_host(state, event))
            if isinstance(event, OutputChunk):
                await relay.send(event)
            elif isinstance(event, ToolCall):
                await relay.send_call(event)
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
        if not service.closing:  # a later resume of the call (another worker) is told why it has no result
            service.record_ended(call, ExecutionGone(protocol.DISCONNECTED_TEXT, cause="disconnected"))
        await asyncio.shield(cancel_execution(execution, "the MCP request was cancelled", decider))
        raise


async def _stops(execution: Execution, calls: HostCalls | None) -> AsyncIterator[ExecutionEvent | HandedCall]:
    """``execution``'s events, and the calls of agent tools its code makes, as they come."""
    while True:
        handed = calls.take() if calls is not None else None
        if handed is not None:
            yield handed
            continue
        event: asyncio.Future[ExecutionEvent] = asyncio.ensure_future(anext(execution))
        if calls is not None:
            arrival = asyncio.ensure_future(calls.arrival())
            first: set[asyncio.Future[Any]] = {event, arrival}
            try:
                await asyncio.wait(first, return_when=asyncio.FIRST_COMPLETED)
            finally:
                arrival.cancel()
            if not event.done():  # a call came first; the event stays queued for the next turn
                event.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await event
                continue
        try:
            item = await event
        except StopAsyncIteration:
            return
        yield item


def _handed(service: IpyboxService, result: Round, caller: Caller) -> Round:
    """``result``, going to ``caller``; an agent tool call in it is handed to that client."""
    if isinstance(result, InputRequiredResult):
        parked = service.parked.get(result.request_state or "")
        if parked is not None and parked.context.host_call is not None:
            parked.context.host_call.hand_to(caller.client)
    return result


def _ask_host(state: str, handed: HandedCall) -> InputRequiredResult:
    """The round that hands the agent tool call ``handed`` to the client (or, for a
    :class:`HandedCheck`, asks the client's before-call check about the call)."""
    if isinstance(handed, HandedQuestion):  # the server's own form (or URL), relayed
        question = handed.elicitation
        params: ElicitRequestFormParams | ElicitRequestURLParams = (
            ElicitRequestFormParams(message=question.message, requested_schema=dict(question.schema))
            if question.url is None
            else ElicitRequestURLParams(
                message=question.message, url=question.url, elicitation_id=handed.question.id
            )
        )
        return InputRequiredResult(
            input_requests={state: ElicitRequest(params=params)},
            request_state=state,
            _meta={protocol.QUESTION: protocol.question_data(question)},
        )
    if isinstance(handed, HandedCheck):
        message = f"May the code call {handed.request.name} now? Answer allow, or refuse with a reason."
        schema, meta = CHECK_SCHEMA, {protocol.CHECK: protocol.approval_data(handed.request)}
    else:
        message = f"Run agent tool {handed.question.tool!r} in the application and answer with its outcome."
        schema, meta = OUTCOME_SCHEMA, {protocol.HOST_CALL: call_data(handed.question)}
    form = ElicitRequestFormParams(message=message, requested_schema=schema)
    return InputRequiredResult(
        input_requests={state: ElicitRequest(params=form)}, request_state=state, _meta=meta
    )


OUTCOME_SCHEMA: dict[str, Any] = {"type": "object", "properties": {"outcome": {"type": "string"}}}
"""The form of an agent tool call: the outcome as JSON text (``ipybox.dev/host_call`` says how)."""


CHECK_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"allow": {"type": "boolean"}, "refuse": {"type": "string"}},
}
"""The form of a before-call check (``ipybox.dev/check``): allow, or refuse with a reason."""


def _check_calls(service: IpyboxService, meta: Any, execution: Execution, calls: HostCalls | None) -> None:
    """Check each call of ``execution`` with the client from now on if this round asks for it
    (``ipybox.dev/before_call``), else not."""
    if calls is not None:
        on = protocol.meta_value(meta, protocol.BEFORE_CALL) is True
        calls.check_calls(execution, on, wait_for=service.settings.approval_timeout)


def _takes_questions(meta: Any) -> bool:
    """Whether the client of this round answers MCP servers' questions (``ipybox.dev/questions``)."""
    return protocol.meta_value(meta, protocol.QUESTIONS) is True


def _content(response: object) -> object:
    """The ``content`` of an input response (an :class:`ElicitResult` or its dict form)."""
    return response.get("content") if isinstance(response, dict) else getattr(response, "content", None)


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
