"""Interrupt mode: inside a LangGraph graph with a checkpointer, each MCP call is one ``interrupt()``.

LangGraph re-runs an interrupted tool call from the top on every resume, and ``interrupt()`` matches
answers to calls by their order within the call. The execution waits in its executor under the
thread's tool call id (over ``RemoteSessions``: in the ipybox service), so on each entry the tool
finds it there again (``executor.reattach``), from this or any other tool instance or process,
re-issues the interrupts already answered (they return their stored answers at once) and carries
on with that ONE execution: the code is never run twice. The answer given to the pending
interrupt applies only if that interrupt showed the very call that waits; otherwise the call is
asked again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from langchain.tools import ToolRuntime
from langgraph.errors import GraphInterrupt
from langgraph.types import Interrupt, interrupt

from ipybox_core import protocol
from ipybox_core.approval import ApprovalRequest
from ipybox_core.errors import ServiceError
from ipybox_core.executor import Execution, ExecutionResult
from ipybox_core.mcp.elicitation import ElicitationRequest
from ipybox_integrations._failures import EXECUTION_FAILURES
from ipybox_integrations._session import (
    BUSY_MESSAGE,
    describe_failure,
    start_execution,
    with_notes,
)
from ipybox_integrations._waiting import not_waiting
from ipybox_integrations.langchain._agent_tools import bind_context, let_through
from ipybox_integrations.langchain._checkpoint import (
    answered_before,
    answers_when_asked,
    shown_before,
    withhold_consumed_answer,
)
from ipybox_integrations.langchain._content import ContentBlocks, ExecuteCodeError, noted, result_content
from ipybox_integrations.langchain._elicit import (
    ElicitationResponse,
    answer_question,
    asks_question,
    is_question,
    question_value,
)
from ipybox_integrations.langchain._hitl import (
    TOOL_NAME,
    add_notice,
    apply_decision,
    args_schema_of,
    decision_schema,
    edit_notice,
    hitl_request,
    parse_response,
    response_schema,
    tool_approval_request,
)
from ipybox_integrations.langchain._runs import record_call
from ipybox_integrations.langchain._sessions import thread_of
from ipybox_integrations.langchain._settings import ToolSettings
from ipybox_integrations.langchain._stream import StreamWriter, next_stop

STALE_APPROVAL_MESSAGE = protocol.NOT_WAITING_MESSAGE
"""Told when an answered call finds no execution waiting for it any more."""


@dataclass(eq=False)
class _Call:
    """One entry of an ``execute_code`` call into its execution."""

    thread_id: str
    call_id: str
    execution: Execution
    request: ApprovalRequest | ElicitationRequest | None = None
    """The question the execution waits on: a held call, or an MCP server's question (``None``: it runs)."""
    answered: int = 0
    """How many of this call's interrupts LangGraph has answered (replayed on every entry)."""
    surfaced: int | None = None
    """Index of the interrupt shown to the human for ``request`` (only an answer to it counts)."""
    notes: list[str] = field(default_factory=list)
    """What the model must read before the result (a restart notice)."""
    edits: list[str] = field(default_factory=list)
    """The reviewer notices of the MCP calls a human edited (re-derived from the answers on each entry)."""
    write: StreamWriter | None = None
    """LangGraph's stream writer: the code's output goes there as it runs (``stream_mode="custom"``)."""
    runtime: ToolRuntime | None = None
    """The ``execute_code`` call's runtime (what the agent's ``interrupt_on`` predicates judge)."""
    refused: str | None = None
    """Why the last answer to the MCP server's question was refused (told when it is asked again)."""


async def run_in_graph(settings: ToolSettings, code: str, runtime: ToolRuntime) -> ContentBlocks:
    """Run (or continue) the execution of this tool call, interrupting for every approval request."""
    thread_id, call_id = thread_of(runtime.config), runtime.tool_call_id or ""
    await settings.waiting.settle()  # a call abandoned by its timer is cancelled before anything runs
    settings.waiting.resumed(thread_id, call_id)
    notes = settings.notes.take((thread_id, call_id))
    call: _Call | None = None
    answered, shown = answered_before(), _own(shown_before())
    if shown is not None:  # a re-entry: the execution waits in its executor
        found = await _reattach(settings, thread_id, call_id, shown, runtime)
        if isinstance(found, ExecutionResult):
            return await noted(notes, _result_of(found))  # it finished meanwhile
        if found is None and answered:  # nothing waits for this call any more: why
            executor = (await settings.conversations.session(thread_id)).executor
            raise ExecuteCodeError(with_notes(notes, await not_waiting(executor, call_id)))
        call = found
    if call is None:
        call = await _start(settings, code, runtime, _current_call_ids(runtime))
    call.notes[:0] = notes
    call.write, call.runtime = runtime.stream_writer, runtime
    for _ in range(call.answered):  # already answered: each returns its stored answer (indices aligned)
        add_notice(call.edits, edit_notice(interrupt(None)))
    told: list[str] = []
    return await noted(told, _drive(settings, call, told))


async def _result_of(result: ExecutionResult) -> ContentBlocks:
    return result_content(result)


async def _drive(settings: ToolSettings, call: _Call, told: list[str]) -> ContentBlocks:
    """Run the call to its end, asking each question; ``told`` gets the notes the model reads
    before the result (``noted`` reads them once it is there)."""
    while True:
        if call.request is None:
            try:
                stop = await next_stop(
                    call.execution, call.write, call.call_id, questions=settings.elicitation
                )
            except ExecuteCodeError:
                told += [*call.notes, *call.edits]
                raise
            if isinstance(stop, ExecutionResult):
                told += [*call.notes, *call.edits]
                return result_content(stop)
            call.request = stop
        if isinstance(call.request, ElicitationRequest):
            await _put(settings, call, call.request)
        else:
            await _ask(settings, call, call.request)


async def _ask(settings: ToolSettings, call: _Call, request: ApprovalRequest) -> None:
    """Put ``request`` to the human (ends the graph run) or, on re-entry, apply the answer given."""
    review = settings.review(request, call.runtime)
    if review is None:  # an agent tool the agent's HumanInTheLoopMiddleware does not gate
        await let_through(request)
        call.request = None
        return
    allowed = review.allowed
    per_call = settings.interrupt_mode == "per_call"
    index = call.answered
    withhold_consumed_answer()
    try:
        if per_call:  # HumanInTheLoopMiddleware(interrupt_mode="per_call")'s shape
            question: object = tool_approval_request(request, call.call_id, review)
            schema = decision_schema(request.name, allowed, args_schema_of(request))
        else:
            question = hitl_request(request, review)
            schema = response_schema(request.name, allowed, args_schema_of(request))
        value = interrupt(question, response_schema=schema)
    except GraphInterrupt:
        _left(settings, call)
        raise
    call.answered += 1
    if call.surfaced != index:
        # A value for a question never shown: a consumed resume LangGraph delivered again (it does so
        # after mixing plain and id-keyed resumes, langgraph#8837). Ignore it and ask again.
        return
    decision = parse_response(value, request, allowed, per_call=per_call)
    await apply_decision(request, decision)
    await record_call(request)
    add_notice(call.edits, edit_notice(value))
    call.request = None


async def _put(settings: ToolSettings, call: _Call, question: ElicitationRequest) -> None:
    """Put an MCP server's ``question`` to the user (ends the graph run) or, on re-entry, give it
    the answer given; content the schema refuses asks again, saying why."""
    index = call.answered
    withhold_consumed_answer()
    try:
        value = interrupt(
            question_value(question, call.call_id, call.refused), response_schema=ElicitationResponse
        )
    except GraphInterrupt:
        _left(settings, call)
        raise
    call.answered += 1
    if call.surfaced != index:  # a consumed resume delivered again (see _ask): ask again
        return
    call.refused = await answer_question(question, value)
    if call.refused is None:
        call.request = None


def _left(settings: ToolSettings, call: _Call) -> None:
    """The execution waits in its executor; this tool remembers that it left it there."""
    settings.waiting.left(call.thread_id, call.call_id)
    settings.notes.put_back((call.thread_id, call.call_id), call.notes)


async def _start(
    settings: ToolSettings, code: str, runtime: ToolRuntime, current_call_ids: set[str] | None
) -> _Call:
    thread_id, call_id = thread_of(runtime.config), runtime.tool_call_id or ""
    if current_call_ids is not None:  # what an earlier turn left waiting is abandoned
        await settings.waiting.cancel_conversation(thread_id, keep=current_call_ids)
    session, notes = await settings.session(thread_id)
    if settings.agent_tools is not None and not session.executor.busy:
        bind_context(session.executor, runtime)  # the agent tools its code calls run in this call
    execution = start_execution(session.executor, code, settings.timeout, call_id=call_id)
    if execution is None:  # e.g. a parallel execute_code call of the same model turn waits
        raise ExecuteCodeError(with_notes(notes, BUSY_MESSAGE))
    return _Call(thread_id, call_id, execution, notes=notes)


async def _reattach(
    settings: ToolSettings, thread_id: str, call_id: str, shown: Interrupt | None, runtime: ToolRuntime
) -> _Call | ExecutionResult | None:
    """This call's execution from its executor, where this or another tool instance (over an
    ipybox service: another process) left it waiting.

    Its result when it finished meanwhile (the cause it ended with, as an error); ``None`` when
    nothing waits for this call. The call counts the answers LangGraph stored for it; its pending
    question counts as shown (an answer to it applies) only if the checkpoint's last interrupt of
    this call asked about the same MCP call, else it is asked again.
    """
    session = await settings.conversations.session(thread_id)
    try:
        execution = await session.executor.reattach(call_id)
        if execution is not None and settings.agent_tools is not None:
            await settings.agent_tools.prepare(settings.conversations.source)
            bind_context(session.executor, runtime)  # its agent tool calls run in this entry
        stop = None
        if execution is not None:
            stop = await next_stop(execution, runtime.stream_writer, call_id, questions=settings.elicitation)
    except (ServiceError, *EXECUTION_FAILURES) as error:
        raise ExecuteCodeError(describe_failure(error)) from error  # ExecutionGone names its cause
    if execution is None or stop is None:
        return None  # an answer for it is lost (STALE_APPROVAL_MESSAGE); a question only shown is asked anew
    if isinstance(stop, ExecutionResult):
        return stop
    answered = answers_when_asked(shown)
    surfaced = answered if shown is not None and _asks_about(shown.value, stop) else None
    return _Call(thread_id, call_id, execution, stop, answered=answered, surfaced=surfaced)


def _asks_about(shown: object, request: ApprovalRequest | ElicitationRequest) -> bool:
    """True when ``shown`` (an interrupt value) asked about ``request`` (its name and arguments;
    a question: its server, tool, message and form)."""
    if isinstance(request, ElicitationRequest):
        return asks_question(shown, request)
    return _action_of(shown) == (request.name, dict(request.args))


def _action_of(value: object) -> tuple[object, object] | None:
    """The one action an interrupt value asks about (a ``HITLRequest``'s or a ``ToolApprovalRequest``'s)."""
    if not isinstance(value, Mapping):
        return None
    if value.get("type") == "tool_approval":
        return value.get("name"), value.get("args")
    actions = value.get("action_requests")
    if not isinstance(actions, list) or len(actions) != 1 or not isinstance(actions[0], Mapping):
        return None
    return actions[0].get("name"), actions[0].get("args")


def _own(shown: Interrupt | None) -> Interrupt | None:
    """``shown`` if this tool asked it about a held call or put an MCP server's question (not a HITL
    ``per_call`` gate on the tool itself)."""
    if shown is not None and is_question(shown.value):
        return shown
    action = _action_of(shown.value) if shown is not None else None
    return shown if action is not None and action[0] != TOOL_NAME else None


def _current_call_ids(runtime: ToolRuntime) -> set[str] | None:
    """Ids of the tool calls of the model turn being executed (``None`` when the state does not say)."""
    state = runtime.state
    messages = state.get("messages") if isinstance(state, Mapping) else None
    if not isinstance(messages, Sequence) or not messages:
        return None
    calls = getattr(messages[-1], "tool_calls", None)
    if not isinstance(calls, list):
        return None
    return {str(call.get("id")) for call in calls if isinstance(call, Mapping)}
