"""Interrupt mode: inside a LangGraph graph with a checkpointer, each MCP call is one ``interrupt()``.

LangGraph re-runs an interrupted tool call from the top on every resume, and ``interrupt()`` matches
answers to calls by their order within the call. So on each entry the tool re-issues the interrupts
already answered (they return their stored answers at once), then carries on with the ONE execution
it parked in the session store: the code is never run twice.

Over ``RemoteSessions`` the execution is also parked in the ipybox service under (thread, tool call
id), so a process that never saw it (the application restarted) resumes it from there: the answer
given to the checkpoint's pending interrupt applies only if that interrupt showed the very call that
waits in the service; otherwise the call is asked again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from langchain.tools import ToolRuntime
from langgraph.config import get_config
from langgraph.errors import GraphInterrupt
from langgraph.types import interrupt

from ipybox_core import protocol
from ipybox_core.approval import ApprovalRequest
from ipybox_core.errors import ExecutionCancelled, ExecutionTimeout, KernelDied, ServiceError
from ipybox_core.executor import ExecutionResult
from ipybox_core.suspended import MOVED_ON
from ipybox_integrations._session import (
    BUSY_MESSAGE,
    describe_failure,
    parked_key,
    reattach,
    start_execution,
    with_notes,
)
from ipybox_integrations.langchain._content import ContentBlocks, ExecuteCodeError, noted, result_content
from ipybox_integrations.langchain._hitl import (
    apply_decision,
    decisions_for,
    hitl_request,
    parse_response,
    response_schema,
)
from ipybox_integrations.langchain._sessions import (
    CallState,
    Parked,
    Store,
    discard,
    of_thread,
    suspended_of,
    thread_of,
)
from ipybox_integrations.langchain._settings import ToolSettings

# LangGraph's private config keys and write channel (langgraph/_internal/_constants.py), read defensively.
_SCRATCHPAD_KEY = "__pregel_scratchpad"
_CHECKPOINTER_KEY = "__pregel_checkpointer"
_TASK_ID_KEY = "__pregel_task_id"
_RESUME_CHANNEL = "__resume__"
_INTERRUPT_CHANNEL = "__interrupt__"

LOST_MESSAGE = protocol.NOT_WAITING_MESSAGE
"""Told when an answered call finds no execution in this process (nothing outlives the process)."""


def interrupts_available() -> bool:
    """True inside a LangGraph task whose graph has a checkpointer: ``interrupt()`` can pause and resume."""
    try:
        configurable = get_config().get("configurable", {})
    except RuntimeError:
        return False
    return _SCRATCHPAD_KEY in configurable and configurable.get(_CHECKPOINTER_KEY) is not None


async def run_in_graph(settings: ToolSettings, code: str, runtime: ToolRuntime) -> ContentBlocks:
    """Run (or continue) the execution of this tool call, interrupting for every approval request."""
    thread_id = thread_of(runtime.config)
    tool_call_id = runtime.tool_call_id or ""
    store = suspended_of(settings.source)
    await store.settle()  # an execution abandoned meanwhile is cancelled before anything else runs
    parked = store.get(parked_key(thread_id, tool_call_id))
    if parked is None:
        answered, shown = _answered_before(), _shown_before()
        if answered or shown is not None:  # a re-entry: did another process park it in a service?
            found = await _reattach(settings, store, thread_id, tool_call_id, shown)
            if isinstance(found, list):
                return found  # it finished meanwhile
            if found is None and answered:  # nothing waits for this call any more
                raise ExecuteCodeError(LOST_MESSAGE)
            parked = found
        if parked is None:
            parked = await _start(settings, store, code, thread_id, tool_call_id, _current_call_ids(runtime))
    for _ in range(parked.context.answered):
        interrupt(None)  # already answered: returns the stored answer, keeps the indices aligned
    return await noted(parked.context.notes, _drive(settings, store, parked))


async def _drive(settings: ToolSettings, store: Store, parked: Parked) -> ContentBlocks:
    while True:
        if parked.request is None:
            stop = await _next_stop(store, parked)
            if not isinstance(stop, ApprovalRequest):
                discard(store, parked)
                return result_content(stop)
            parked.request = stop
        parked = await _ask(settings, store, parked, parked.request)


async def _ask(settings: ToolSettings, store: Store, parked: Parked, request: ApprovalRequest) -> Parked:
    """Put ``request`` to the human (ends the graph run) or, on re-entry, apply the answer given."""
    allowed = decisions_for(request, settings.allowed_decisions)
    state = parked.context
    index = state.answered
    # The abandonment timer runs from now until the answer comes.
    parked = store.park(parked.key, parked.execution, request, state, abandon_after=settings.abandon_after)
    withhold_consumed_answer()
    try:
        value = interrupt(
            hitl_request(request, settings.allowed_decisions, settings.describe),
            response_schema=response_schema(request.name, allowed),
        )
    except GraphInterrupt:
        state.surfaced = index
        raise
    state.answered += 1
    if state.surfaced != index:
        # A value for a question never shown: a consumed resume LangGraph delivered again (it does so
        # after mixing plain and id-keyed resumes, langgraph#8837). Ignore it and ask again.
        return parked
    await apply_decision(request, parse_response(value, request, settings.allowed_decisions))
    return store.park(parked.key, parked.execution, None, state, abandon_after=None)


async def _next_stop(store: Store, parked: Parked) -> ApprovalRequest | ExecutionResult:
    try:
        return await parked.execution.next_stop()
    except (ExecutionTimeout, KernelDied, ExecutionCancelled) as error:
        discard(store, parked)
        raise ExecuteCodeError(describe_failure(error)) from error


async def _start(
    settings: ToolSettings,
    store: Store,
    code: str,
    thread_id: str,
    tool_call_id: str,
    current_call_ids: set[str] | None,
) -> Parked:
    for other in of_thread(store, thread_id):
        if current_call_ids is None or other.context.tool_call_id in current_call_ids:
            raise ExecuteCodeError(BUSY_MESSAGE)  # a parallel execute_code call of the same model turn
        await store.cancel(other.key, MOVED_ON)  # left behind by an earlier turn
    session, notes = await settings.session(thread_id)
    execution = start_execution(session.executor, code, settings.timeout, call_id=tool_call_id)
    if execution is None:
        raise ExecuteCodeError(with_notes(notes, BUSY_MESSAGE))
    state = CallState(thread_id, tool_call_id, notes=notes)
    return store.park(parked_key(thread_id, tool_call_id), execution, None, state, abandon_after=None)


async def _reattach(
    settings: ToolSettings,
    store: Store,
    thread_id: str,
    tool_call_id: str,
    shown: object,
) -> Parked | ContentBlocks | None:
    """This call's execution from its executor, when another tool instance (over an ipybox
    service: another process) left it waiting there.

    Content when it finished meanwhile (or the cause it ended with, as an error); ``None`` when
    nothing waits for this call. The parked call counts the answers
    LangGraph stored for this call; its pending question counts as shown (an answer to it applies)
    only if the checkpoint's last interrupt of this call asked about the same MCP call, else it is
    asked again.
    """
    session = await settings.conversations.session(thread_id)
    try:
        execution = await reattach(session.executor, tool_call_id)
        stop = None if execution is None else await execution.next_stop()
    except (ServiceError, ExecutionTimeout, KernelDied, ExecutionCancelled) as error:
        raise ExecuteCodeError(describe_failure(error)) from error  # ExecutionGone names its cause
    if execution is None or stop is None:
        return None  # an answer for it is lost (LOST_MESSAGE); a question only shown is asked anew
    if isinstance(stop, ExecutionResult):
        return result_content(stop)
    answered = len(_stored_answers())
    state = CallState(thread_id, tool_call_id, answered=answered)
    if _asks_about(shown, stop, settings):
        state.surfaced = answered
    return store.park(parked_key(thread_id, tool_call_id), execution, stop, state, abandon_after=None)


def _asks_about(shown: object, request: ApprovalRequest, settings: ToolSettings) -> bool:
    """True when ``shown`` (an interrupt value) is the ``HITLRequest`` for ``request``."""
    if not isinstance(shown, Mapping):
        return False
    actions = shown.get("action_requests")
    if not isinstance(actions, list) or len(actions) != 1 or not isinstance(actions[0], Mapping):
        return False
    expected = hitl_request(request, settings.allowed_decisions, settings.describe)["action_requests"][0]
    return actions[0].get("name") == expected["name"] and actions[0].get("args") == expected["args"]


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


def withhold_consumed_answer() -> bool:
    """Keep an answer this tool call already consumed from answering its next question; True if one was.

    A plain ``Command(resume=...)`` is stored on the checkpoint and stays there after this call took
    it, so a later run that brings no answer of its own (``ainvoke(None)``, or an id-keyed resume for
    an earlier question) would hand it to the next ``interrupt()`` as if the human had answered it
    (langgraph#8837). A run's own plain answer is added after everything loaded from the checkpoint,
    so an answer stored *before* this call's record of the answers it consumed is an old one: it is
    consumed here, in memory only, and ``interrupt()`` asks the human again.
    """
    configurable = get_config().get("configurable", {})
    scratchpad = configurable.get(_SCRATCHPAD_KEY)
    peek = getattr(scratchpad, "get_null_resume", None)
    cells = _closure_of(peek)
    writes, answer = cells.get("pending_writes"), cells.get("null_resume_write")
    if not isinstance(writes, list) or answer is None or scratchpad is None:
        return False
    at = next((index for index, write in enumerate(writes) if write is answer), None)
    task_id = configurable.get(_TASK_ID_KEY)
    consumed = [
        index
        for index, write in enumerate(writes)
        if isinstance(write, tuple) and write[:2] == (task_id, _RESUME_CHANNEL)
    ]
    if at is None or not consumed or at > max(consumed):
        return False
    scratchpad.get_null_resume(True)
    return True


def _closure_of(function: object) -> dict[str, object]:
    code = getattr(function, "__code__", None)
    cells = getattr(function, "__closure__", None) or ()
    if code is None:
        return {}
    values: dict[str, object] = {}
    for name, cell in zip(code.co_freevars, cells, strict=False):
        try:
            values[name] = cell.cell_contents
        except ValueError:  # an empty cell
            continue
    return values


def _task_writes(channel: str) -> list[object]:
    """The values this task wrote to ``channel`` that the checkpoint holds (from an earlier run)."""
    configurable = get_config().get("configurable", {})
    scratchpad = configurable.get(_SCRATCHPAD_KEY)
    writes = _closure_of(getattr(scratchpad, "get_null_resume", None)).get("pending_writes")
    task_id = configurable.get(_TASK_ID_KEY)
    if not isinstance(writes, list) or task_id is None:
        return []
    return [
        write[2]
        for write in writes
        if isinstance(write, tuple) and len(write) == 3 and write[:2] == (task_id, channel)
    ]


def _stored_answers() -> list[object]:
    """The answers this tool call consumed in earlier runs (as saved on the checkpoint)."""
    for value in _task_writes(_RESUME_CHANNEL):
        return list(value) if isinstance(value, list) else [value]
    return []


def _shown_before() -> object:
    """The value of the last interrupt this tool call raised (saved on the checkpoint), or ``None``."""
    for value in _task_writes(_INTERRUPT_CHANNEL):
        interrupts = value if isinstance(value, (list, tuple)) else [value]
        for item in interrupts:
            return getattr(item, "value", None)
    return None


def _answered_before() -> bool:
    """True when LangGraph holds answers for this tool call's approval questions: it was suspended before.

    Looks at the answers stored for this task and at a pending plain ``Command(resume=...)`` value.
    """
    scratchpad = get_config().get("configurable", {}).get(_SCRATCHPAD_KEY)
    values = list(getattr(scratchpad, "resume", None) or [])
    peek = getattr(scratchpad, "get_null_resume", None)
    if callable(peek):
        values.append(peek(False))
    return any(isinstance(value, Mapping) and "decisions" in value for value in values)
