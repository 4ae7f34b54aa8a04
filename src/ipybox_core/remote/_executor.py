"""The executor of one session on an ipybox service: ``stream()`` and ``reattach()`` over MCP rounds."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field
from typing import Any

from mcp_types import CallToolResult, ElicitResult, ImageContent, InputRequiredResult

from ipybox_core import protocol
from ipybox_core._ended_calls import EndedCalls
from ipybox_core.approval import ApprovalDecision, ApprovalRequest, ApprovalRules
from ipybox_core.errors import CodeError, ExecutionGone, ExecutorBusy, ServiceError
from ipybox_core.executor import Execution, ExecutionResult, OutputChunk, ToolCall
from ipybox_core.executor.execution import Emit
from ipybox_core.executor.executor import run_to_end
from ipybox_core.hosttools import HostTool
from ipybox_core.hosttools._wire import call_from_data
from ipybox_core.mcp.elicitation import ElicitationRequest
from ipybox_core.protocol import MOVED_ON
from ipybox_core.remote._connection import OnOutput, OnToolCall, Round, ServiceConnection
from ipybox_core.remote._host_tools import RemoteHostTools, joined_reference


class RemoteExecutor:
    """Runs code in one session's kernel on an ipybox service, with the events of a local executor.

    ``stream(code, call_id=...)`` starts an :class:`~ipybox_core.executor.Execution` whose approval
    requests carry the service's approval ids; decide them as usual (``accept``/``reject``).
    Output arrives as :class:`~ipybox_core.executor.OutputChunk` events while the code prints it
    (rich displays come with the result). An execution parked at an approval outlives this
    process: :meth:`reattach` in any process picks it up again by its ``call_id``, and
    :meth:`cancel_waiting` in any process cancels it when the conversation moved on.
    """

    def __init__(
        self,
        connection: ServiceConnection,
        session: str,
        api_reference: Callable[[], str],
        *,
        approval_rules: ApprovalRules | None = None,
        host_tools: RemoteHostTools | None = None,
    ) -> None:
        self._connection = connection
        self.session = session
        self.approval_rules = approval_rules
        """Rules that narrow the service's for this session's calls (never widen them): a call the
        service's rules allow is asked or denied when these say so (``None``: the service's alone)."""
        self._api_reference = api_reference
        self._host = host_tools if host_tools is not None else RemoteHostTools()
        self._tool_context: Any = None
        self._active: Execution | None = None
        self._active_call: str | None = None  # the call id the active execution runs under
        self._active_rounds: _Rounds | None = None  # the active execution's open question
        self._gone = EndedCalls(limit=256)  # what the service said of calls that no longer wait

    @property
    def busy(self) -> bool:
        """True while code started here runs. One that waits for a decision is the service's to
        keep (any process may answer or cancel it): a new :meth:`stream` then lets the service say
        whether the session is still busy, raised as ``ExecutorBusy`` by that execution."""
        active = self._active
        return active is not None and not active.done and not active.pending_approvals

    def api_reference(self, servers: list[str] | None = None, *, max_chars: int | None = None) -> str:
        """The Python API of the service's MCP servers (fetched when the connection opened) and of
        the host tools."""
        del servers  # the service's reference covers all of its servers
        return joined_reference(str(self._api_reference()), self._host.reference, max_chars)

    async def register_host_tools(self, tools: Iterable[HostTool]) -> None:
        """Let this session's code call ``tools`` (``from agent_tools import ...``); they run in
        this process (see :meth:`RemoteSessions.register_host_tools`)."""
        own = RemoteHostTools()
        await own.replace(tools)
        self._host = own

    @property
    def host_tools(self) -> list[HostTool]:
        """The host tools this session's code can call."""
        return list(self._host.tools)

    def bind_tool_context(self, context: Any) -> None:
        """Hand ``context`` to every host tool call of this session's code from now on (as
        :meth:`CodeExecutor.bind_tool_context` does)."""
        self._tool_context = context

    def stream(self, code: str, *, timeout: float | None = None, call_id: str | None = None) -> Execution:
        """Run ``code``; ``call_id`` names the call so another process can :meth:`reattach` to it."""
        if self.busy:
            raise ExecutorBusy(protocol.BUSY_MESSAGE)
        arguments: dict[str, Any] = {"code": code}
        if timeout is not None:
            arguments["timeout"] = timeout

        host_tools = self._host.data

        async def first(emit: Emit, rounds: _Rounds) -> Round:
            return await self._connection.execute(
                self.session,
                arguments=arguments,
                call=call_id,
                on_output=_chunks(emit),
                on_tool_call=self._calls(emit, rounds),
                rules=self.approval_rules,
                host_tools=host_tools,
                before_call=rounds.checking,
                questions=True,
            )

        return self._execution(first, arguments, call_id)

    async def execute(
        self, code: str, *, timeout: float | None = None, approve_all: bool = False
    ) -> ExecutionResult:
        """Run ``code`` to the end, as ``CodeExecutor.execute``: a call the rules leave to a decision
        is accepted with ``approve_all``, else rejected (:class:`~ipybox_core.errors.ConfigError`)."""
        return await run_to_end(self.stream(code, timeout=timeout), approve_all=approve_all)

    async def reattach(self, call_id: str) -> Execution | None:
        """The execution parked under ``call_id`` in this session (from any process), or ``None``.

        Started here and still waiting: that execution, its pending approval handed out again (or,
        when the approvals inbox answered it meanwhile, the request decided so and the execution
        going on to its next stop); otherwise the service's, picked up with its pending question."""
        active = self._active
        if active is not None and not active.done and self._active_call == call_id:
            if not await self._catch_up(call_id):  # it ended in the service: this handle is stale
                with contextlib.suppress(Exception):
                    await active.cancel("it no longer waits in the ipybox service")
                return None
            active.resurface()
            return active
        arguments: dict[str, Any] = {"code": ""}
        first = await self._connection.execute(
            self.session, arguments=arguments, call=call_id, resume=True, questions=True
        )
        if _error_kind(first) == "gone":
            self._gone.record(call_id, _gone_error(first))  # why: for ended()
            return None

        async def again(emit: Emit, rounds: _Rounds) -> Round:
            return first

        return self._execution(again, arguments, call_id)

    async def ended(self, call_id: str) -> ExecutionGone | None:
        """Why nothing waits under ``call_id``, as the service told the last :meth:`reattach` of
        it that found nothing (``None``: the service does not know)."""
        gone = self._gone.get(call_id)
        return gone if gone is not None and gone.cause is not None else None

    async def cancel_waiting(
        self,
        *,
        calls: Collection[str] | None = None,
        keep: Collection[str] = (),
        reason: str | None = None,
    ) -> int:
        """Cancel this session's executions that wait for an approval in the service, started by
        any process: those of ``calls`` if given, never those of ``keep`` (e.g. the conversation
        moved on). Their pending MCP calls never run; returns how many were cancelled."""
        cancelled = await self._connection.cancel_waiting(self.session, calls=calls, keep=keep, reason=reason)
        active, call = self._active, self._active_call
        chosen = call is not None and (calls is None or call in calls) and call not in keep
        if active is not None and not active.done and chosen:
            await active.cancel(reason or MOVED_ON)  # this process's handle of a cancelled call
        return cancelled

    async def reset(self) -> None:
        """Restart the session's kernel on the service (state lost, MCP servers kept)."""
        await self._connection.call_tool(self.session, "reset", {})

    def tool_summaries(self) -> None:
        """``None``: the service's tools are learned from its approval requests."""
        return None

    def tool_description(self, server: str, tool: str) -> None:
        """``None``: the service's reference is the API text (:meth:`api_reference`)."""
        return None

    async def aclose(self) -> None:
        """Nothing to release: the kernel and what waits in it stay in the service (closing the
        connection is :meth:`RemoteSessions.aclose`'s)."""

    # --- rounds ---------------------------------------------------------------------------------

    async def _catch_up(self, call_id: str) -> bool:
        """If the active execution's open question was answered elsewhere (the approvals inbox),
        decide its request as the service did and hand the execution's next stop to its rounds;
        False when the service knows it no longer waits (another client answered it, it was
        cancelled or expired: :meth:`ended` says which)."""
        rounds = self._active_rounds
        question = rounds.waiting[-1] if rounds is not None and rounds.waiting else None
        if rounds is None or question is None or not question.request.pending:
            return True
        resume: dict[str, Any] = {"code": ""}
        reply = await self._connection.execute(self.session, arguments=resume, call=call_id, resume=True)
        if _error_kind(reply) == "gone" and (gone := _gone_error(reply)).cause is not None:
            self._gone.record(call_id, gone)
            return False
        answers = protocol.meta_value(reply.meta, protocol.ANSWERED)
        if not isinstance(answers, list) or not question.request.pending:
            return True  # still waiting (or gone: answering it says so)
        mine = next((a for a in answers if isinstance(a, dict) and a.get("id") == question.request.id), {})
        rounds.handoff.append(reply)
        rounds.arguments = resume  # the next question's state is bound to the round that got it
        reason = mine.get("reason")
        question.request.resolve(
            ApprovalDecision(
                approved=mine.get("approved") is True,
                decided_by=str(mine.get("decided_by") or "another client"),
                reason=reason if isinstance(reason, str) else None,
            )
        )
        return True

    def _execution(self, first: Any, arguments: dict[str, Any], call_id: str | None) -> Execution:
        """An execution over rounds; every retry resends ``arguments`` (the service's request
        state is bound to the call it was issued for)."""
        cancelled = asyncio.Event()
        rounds = _Rounds(call_id, arguments)
        waiting = rounds.waiting

        async def drive(emit: Emit) -> ExecutionResult:
            body = asyncio.ensure_future(
                self._rounds(await_first=first, emit=emit, rounds=rounds, cancelled=cancelled)
            )
            body.add_done_callback(lambda _: rounds.unreported())
            stop = asyncio.ensure_future(cancelled.wait())
            try:
                await asyncio.wait({body, stop}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                stop.cancel()
            if body.done():
                return body.result()
            body.cancel()
            with contextlib.suppress(BaseException):
                await body
            open_round = (waiting[-1].key, waiting[-1].state) if waiting else rounds.running
            if open_round is not None:  # stop it on the service too: the question will not be answered
                key, state = open_round
                with contextlib.suppress(Exception):
                    await self._connection.execute(
                        self.session,
                        arguments=rounds.arguments,
                        input_responses={key: ElicitResult(action="cancel", content={"cancel": True})},
                        request_state=state,
                    )
            return ExecutionResult(text="")

        async def cancel() -> None:
            cancelled.set()

        execution = Execution(drive, self._finished, cancel)
        rounds.execution = execution
        self._active, self._active_call, self._active_rounds = execution, call_id, rounds
        return execution

    async def _rounds(
        self,
        *,
        await_first: Any,
        emit: Emit,
        rounds: _Rounds,
        cancelled: asyncio.Event,
    ) -> ExecutionResult:
        reply: Round = await await_first(emit, rounds)
        while isinstance(reply, InputRequiredResult):
            key = next(iter(reply.input_requests or {}), "")
            state = reply.request_state or ""
            question = call_from_data(protocol.meta_value(reply.meta, protocol.HOST_CALL))
            if question is not None:  # the code called an agent tool: it runs here
                rounds.running = (key, state)
                outcome = await self._host.run(question, self._tool_context)
                rounds.running = None
                answered = ElicitResult(action="accept", content={"outcome": outcome})
                reply = await self._answer(emit, rounds, key, state, answered)
                continue
            asked = protocol.meta_value(reply.meta, protocol.QUESTION)
            if asked is not None:  # an MCP server's question: an event of this execution
                rounds.running = (key, state)
                answered = await _answer_of(protocol.question_from_data(asked), emit)
                if cancelled.is_set():
                    await asyncio.Event().wait()  # the driver stops the execution instead of answering
                rounds.running = None
                reply = await self._answer(emit, rounds, key, state, answered)
                continue
            checked = protocol.meta_value(reply.meta, protocol.CHECK)
            if checked is not None:  # the service asks this execution's before_call about a call
                request = rounds.ask(protocol.approval_from_data(checked))
                rounds.running = (key, state)
                answered = ElicitResult(action="accept", content=await rounds.check(request))
                rounds.running = None
                reply = await self._answer(emit, rounds, key, state, answered)
                continue
            request = rounds.ask(
                protocol.approval_from_data(protocol.meta_value(reply.meta, protocol.APPROVAL))
            )
            rounds.waiting.append(_Question(key, state, request))
            emit(request)
            decision = await request.wait()
            if cancelled.is_set():
                await asyncio.Event().wait()  # the driver stops the execution instead of answering
            if rounds.handoff:  # answered from the inbox: its next stop instead of this answer's
                reply = rounds.handoff.pop(0)
                rounds.waiting.clear()
                continue
            content: dict[str, Any] = {}
            if decision.reason:
                content["reason"] = decision.reason
            if decision.arguments is not None:  # a form value is a string: the edit goes as JSON
                content["arguments"] = json.dumps(decision.arguments)
            answer = ElicitResult(
                action="accept" if decision.approved else "decline", content=content or None
            )
            reply = await self._answer(emit, rounds, key, state, answer)
            rounds.waiting.clear()
        return _result(reply)

    async def _answer(self, emit: Emit, rounds: _Rounds, key: str, state: str, answer: ElicitResult) -> Round:
        """The round that answers the question ``key`` of request state ``state``: the execution's
        next stop (its output and decided calls handed on meanwhile)."""
        return await self._connection.execute(
            self.session,
            arguments=rounds.arguments,
            input_responses={key: answer},
            request_state=state,
            call=rounds.call_id,
            on_output=_chunks(emit),
            on_tool_call=self._calls(emit, rounds),
            before_call=rounds.checking,
            questions=True,
        )

    def _calls(self, emit: Emit, rounds: _Rounds) -> OnToolCall:
        """Hands each decided call the service relays on as a :class:`ToolCall` event (with the
        request this execution was asked about, whose :meth:`~ApprovalRequest.outcome` it gives)."""

        def on_tool_call(data: Any) -> None:
            try:
                request_data, decision, outcome = protocol.tool_call_parts(data)
                request = rounds.asked.get(str(request_data.get("id"))) or protocol.approval_from_data(
                    request_data
                )
            except ServiceError:
                return  # not one this client reads: the call itself is not affected
            request.finish(outcome)
            emit(ToolCall(request, decision, outcome))

        return on_tool_call

    def _finished(self, execution: Execution) -> None:
        if self._active is execution:
            self._active = None


@dataclass(frozen=True)
class _Question:
    """An open question of an execution: its input key, request state and approval request."""

    key: str
    state: str
    request: ApprovalRequest


@dataclass
class _Rounds:
    """An execution's rounds: its call id, its open question, and the next stop handed over by
    :meth:`RemoteExecutor._catch_up` when the inbox answered that question."""

    call_id: str | None
    arguments: dict[str, Any]
    """What every retry resends: the arguments of the round that got the open question."""
    waiting: list[_Question] = field(default_factory=list)
    handoff: list[Round] = field(default_factory=list)
    running: tuple[str, str] | None = None
    """The input key and request state of the agent tool call (or before-call check) this process
    runs for the code."""
    asked: dict[str, ApprovalRequest] = field(default_factory=dict)
    """The requests this execution was asked about, by id (their outcome comes relayed)."""
    execution: Execution | None = None

    @property
    def checking(self) -> bool:
        """Whether the execution checks each call before the policy (``Execution.before_call``)."""
        return self.execution is not None and self.execution.before_call is not None

    def ask(self, request: ApprovalRequest) -> ApprovalRequest:
        """``request``, a call the service asks about: its outcome comes relayed."""
        request.expect_outcome()
        self.asked[request.id] = request
        return request

    async def check(self, request: ApprovalRequest) -> dict[str, Any]:
        """The answer of the execution's ``before_call`` about ``request``'s call (allow when it
        has none; a check that raises refuses the call)."""
        before = self.execution.before_call if self.execution is not None else None
        try:
            verdict = before(request) if before is not None else None
            refusal = await verdict if inspect.isawaitable(verdict) else verdict
        except Exception as error:
            refusal = f"the before-call check failed: {type(error).__name__}: {error}"
        return protocol.check_answer(refusal)

    def unreported(self) -> None:
        """The rounds ended: an outcome not relayed by now will not come (the execution went on
        elsewhere, or ended)."""
        for request in self.asked.values():
            request.finish(None)


async def _answer_of(question: ElicitationRequest, emit: Emit) -> ElicitResult:
    """The answer to an MCP server's ``question``, emitted as an event of the execution: as it
    is answered there (one left open is declined by the execution's rules, with their reason)."""
    question._stream()
    emit(question)
    answer = await question._wait()
    if answer.action == "accept":
        return ElicitResult(action="accept", content=dict(answer.content))
    return ElicitResult(action=answer.action, content={"reason": answer.reason} if answer.reason else None)


def _chunks(emit: Emit) -> OnOutput:
    def on_output(stream: str, text: str) -> None:
        emit(OutputChunk(text, "stderr" if stream == "stderr" else "stdout"))

    return on_output


def _error_kind(reply: Round) -> str | None:
    if not isinstance(reply, CallToolResult) or not reply.is_error:
        return None
    error = protocol.meta_value(reply.meta, protocol.ERROR)
    return str(error.get("kind")) if isinstance(error, dict) else "unavailable"


def _gone_error(reply: Round) -> ExecutionGone:
    texts = [getattr(block, "text", "") for block in getattr(reply, "content", [])]
    error = protocol.decode_error(protocol.meta_value(reply.meta, protocol.ERROR), "\n".join(texts))
    return error if isinstance(error, ExecutionGone) else ExecutionGone(str(error))


def _result(reply: Round) -> ExecutionResult:
    assert isinstance(reply, CallToolResult)
    texts = [getattr(block, "text", "") for block in reply.content if getattr(block, "type", "") == "text"]
    if _error_kind(reply) is not None:
        raise protocol.decode_error(protocol.meta_value(reply.meta, protocol.ERROR), "\n".join(texts))
    images = [protocol.png_of(block.data) for block in reply.content if isinstance(block, ImageContent)]
    data = protocol.meta_value(reply.meta, protocol.RESULT)
    if not isinstance(data, dict):
        return ExecutionResult(text="\n".join(texts), images=images)
    error = data.get("error")
    notice = protocol.meta_value(reply.meta, protocol.NOTICE)
    return ExecutionResult(
        text=(f"{notice}\n\n" if isinstance(notice, str) else "") + str(data.get("text", "")),
        images=images,
        error=CodeError(error["ename"], error["evalue"], error["traceback"]) if error else None,
        execution_count=data.get("execution_count"),
        omitted_chars=int(data.get("omitted_chars", 0)),
    )
