"""Interrupt mode: inside a LangGraph graph with a checkpointer, each MCP call is one ``interrupt()``.

LangGraph re-runs an interrupted tool call from the top on every resume, and ``interrupt()`` matches
answers to calls by their order within the call. So on each entry the tool re-issues the interrupts
already answered (they return their stored answers at once), then carries on with the ONE execution
it parked in the session store: the code is never run twice.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence

from langchain.tools import ToolRuntime
from langgraph.config import get_config
from langgraph.errors import GraphInterrupt
from langgraph.types import interrupt

from ipybox_core.approval import ApprovalRequest
from ipybox_core.errors import ExecutionCancelled, ExecutionTimeout, KernelDied
from ipybox_core.executor import ExecutionResult
from ipybox_integrations._session import BUSY_MESSAGE, describe_failure, start_execution
from ipybox_integrations.langchain._content import ContentBlocks, ExecuteCodeError, result_content
from ipybox_integrations.langchain._hitl import (
    apply_decision,
    decisions_for,
    hitl_request,
    parse_response,
    response_schema,
)
from ipybox_integrations.langchain._sessions import Session, SessionStore, sessions_of
from ipybox_integrations.langchain._settings import ToolSettings

# LangGraph's private config keys (langgraph/_internal/_constants.py), read defensively.
_SCRATCHPAD_KEY = "__pregel_scratchpad"
_CHECKPOINTER_KEY = "__pregel_checkpointer"

LOST_MESSAGE = (
    "Error: the execution of this execute_code call is gone: it waited for approval longer than allowed "
    "and was cancelled, or the application restarted. Its code was NOT run again. Check the kernel "
    "state and run the code again if it is still needed."
)
ABANDONED_REASON = "abandoned: the conversation went on without an answer to this approval request"


def interrupts_available() -> bool:
    """True inside a LangGraph task whose graph has a checkpointer: ``interrupt()`` can pause and resume."""
    try:
        configurable = get_config().get("configurable", {})
    except RuntimeError:
        return False
    return _SCRATCHPAD_KEY in configurable and configurable.get(_CHECKPOINTER_KEY) is not None


async def run_in_graph(settings: ToolSettings, code: str, runtime: ToolRuntime) -> ContentBlocks:
    """Run (or continue) the execution of this tool call, interrupting for every approval request."""
    thread_id = str(runtime.config.get("configurable", {}).get("thread_id", ""))
    tool_call_id = runtime.tool_call_id or ""
    store = sessions_of(settings.executor)
    await store.sweep()
    session = store.get(thread_id, tool_call_id)
    if session is None:
        if _answered_before():  # its execution was cancelled or belonged to another process
            raise ExecuteCodeError(LOST_MESSAGE)
        session = await _start(settings, store, code, thread_id, tool_call_id, _current_call_ids(runtime))
    for _ in range(session.answered):
        interrupt(None)  # already answered: returns the stored answer, keeps the indices aligned
    while True:
        if session.pending is None:
            stop = await _next_stop(store, session)
            if not isinstance(stop, ApprovalRequest):
                store.discard(session)
                return result_content(stop)
            session.pending = stop
        await _ask(settings, session, session.pending)


async def _ask(settings: ToolSettings, session: Session, request: ApprovalRequest) -> None:
    """Put ``request`` to the human (ends the graph run) or, on re-entry, apply the answer given."""
    allowed = decisions_for(request, settings.allowed_decisions)
    index = session.answered
    session.active_at = time.monotonic()
    try:
        value = interrupt(
            hitl_request(request, settings.allowed_decisions, settings.describe),
            response_schema=response_schema(request.name, allowed),
        )
    except GraphInterrupt:
        session.surfaced = index
        raise
    session.answered += 1
    if session.surfaced != index:
        # A value for a question never shown: a consumed resume LangGraph delivered again (it does so
        # after mixing plain and id-keyed resumes, langgraph#8837). Ignore it and ask again.
        return
    await apply_decision(request, parse_response(value, request, settings.allowed_decisions))
    session.pending = None


async def _next_stop(store: SessionStore, session: Session) -> ApprovalRequest | ExecutionResult:
    try:
        return await session.execution.next_stop()
    except (ExecutionTimeout, KernelDied, ExecutionCancelled) as error:
        store.discard(session)
        raise ExecuteCodeError(describe_failure(error)) from error


async def _start(
    settings: ToolSettings,
    store: SessionStore,
    code: str,
    thread_id: str,
    tool_call_id: str,
    current_call_ids: set[str] | None,
) -> Session:
    for other in store.of_thread(thread_id):
        if current_call_ids is None or other.tool_call_id in current_call_ids:
            raise ExecuteCodeError(BUSY_MESSAGE)  # a parallel execute_code call of the same model turn
        await store.cancel(other, ABANDONED_REASON)  # left behind by an earlier turn
    execution = start_execution(settings.executor, code, settings.timeout)
    if execution is None:
        raise ExecuteCodeError(BUSY_MESSAGE)
    session = Session(thread_id, tool_call_id, execution, abandon_after=settings.abandon_after)
    store.add(session)
    return session


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
