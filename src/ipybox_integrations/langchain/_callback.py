"""Callback mode: outside a graph (or without a checkpointer) an async callback decides each MCP call."""

from __future__ import annotations

from ipybox_core.approval import ApprovalRequest
from ipybox_core.errors import ConfigError, ExecutionCancelled, ExecutionTimeout, KernelDied
from ipybox_integrations._session import BUSY_MESSAGE, Executor, describe_failure, start_execution
from ipybox_integrations.langchain._content import ContentBlocks, ExecuteCodeError, noted, result_content
from ipybox_integrations.langchain._hitl import (
    add_notice,
    apply_decision,
    edit_notice,
    hitl_request,
    parse_response,
)
from ipybox_integrations.langchain._runs import record_call
from ipybox_integrations.langchain._settings import ToolSettings
from ipybox_integrations.langchain._stream import StreamWriter, next_stop

NO_APPROVER = (
    "an MCP call made by execute_code needs approval, but there is no way to ask: run the tool inside "
    "a LangGraph graph with a checkpointer (create_agent(..., checkpointer=InMemorySaver())) so that it "
    "can interrupt, or pass approval_callback= to get each request as a HITLRequest"
)


async def run_with_callback(
    settings: ToolSettings, code: str, thread_id: str, write: StreamWriter | None, call_id: str
) -> ContentBlocks:
    """Run ``code`` in the thread's kernel to the end, asking ``settings.approval_callback`` per MCP
    call; its output goes to ``write`` (LangGraph's stream writer) as it runs."""
    session, notes = await settings.session(thread_id)
    return await noted(notes, _run(settings, session.executor, code, write, call_id, notes))


async def _run(
    settings: ToolSettings,
    executor: Executor,
    code: str,
    write: StreamWriter | None,
    call_id: str,
    notes: list[str],
) -> ContentBlocks:
    execution = start_execution(executor, code, settings.timeout)
    if execution is None:
        raise ExecuteCodeError(BUSY_MESSAGE)
    async with execution:  # cancels the code if anything below fails
        while True:
            try:
                stop = await next_stop(execution, write, call_id)
            except (ExecutionTimeout, KernelDied, ExecutionCancelled) as error:
                raise ExecuteCodeError(describe_failure(error)) from error
            if not isinstance(stop, ApprovalRequest):
                return result_content(stop)
            add_notice(notes, edit_notice(await _decide(settings, stop)))
            await record_call(stop)


async def _decide(settings: ToolSettings, request: ApprovalRequest) -> object:
    """Ask the callback about ``request`` and carry out its answer; returns the answer."""
    callback = settings.approval_callback
    if callback is None:
        await request.reject("no approver is configured")
        raise ConfigError(NO_APPROVER)
    response = await callback(hitl_request(request, settings.allowed_decisions, settings.describe))
    decision = parse_response(response, request, settings.allowed_decisions)
    await apply_decision(request, decision)
    return response
