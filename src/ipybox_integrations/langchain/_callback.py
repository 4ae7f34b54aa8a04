"""Callback mode: outside a graph (or without a checkpointer) an async callback decides each MCP call."""

from __future__ import annotations

from langchain.tools import ToolRuntime

from ipybox_core.approval import ApprovalRequest
from ipybox_core.errors import ConfigError
from ipybox_integrations._session import BUSY_MESSAGE, Executor, start_execution
from ipybox_integrations.langchain._agent_tools import bind_context, let_through
from ipybox_integrations.langchain._content import ContentBlocks, ExecuteCodeError, noted, result_content
from ipybox_integrations.langchain._hitl import (
    Review,
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
    settings: ToolSettings, code: str, thread_id: str, runtime: ToolRuntime | None
) -> ContentBlocks:
    """Run ``code`` in the thread's kernel to the end, asking ``settings.approval_callback`` per MCP
    call; its output goes to the runtime's stream writer (LangGraph's) as it runs."""
    session, notes = await settings.session(thread_id)
    return await noted(notes, _run(settings, session.executor, code, runtime, notes))


async def _run(
    settings: ToolSettings,
    executor: Executor,
    code: str,
    runtime: ToolRuntime | None,
    notes: list[str],
) -> ContentBlocks:
    write: StreamWriter | None = runtime.stream_writer if runtime is not None else None
    call_id = (runtime.tool_call_id if runtime is not None else None) or ""
    if settings.agent_tools is not None and not executor.busy:
        bind_context(executor, runtime)  # the agent tools its code calls run in this call
    execution = start_execution(executor, code, settings.timeout)
    if execution is None:
        raise ExecuteCodeError(BUSY_MESSAGE)
    async with execution:  # cancels the code if anything below fails
        while True:
            stop = await next_stop(execution, write, call_id)
            if not isinstance(stop, ApprovalRequest):
                return result_content(stop)
            review = settings.review(stop, runtime)
            if review is None:  # an agent tool the agent's HumanInTheLoopMiddleware does not gate
                await let_through(stop)
                continue
            add_notice(notes, edit_notice(await _decide(settings, stop, review)))
            await record_call(stop)


async def _decide(settings: ToolSettings, request: ApprovalRequest, review: Review) -> object:
    """Ask the callback about ``request`` and carry out its answer; returns the answer."""
    callback = settings.approval_callback
    if callback is None:
        await request.reject("no approver is configured")
        raise ConfigError(NO_APPROVER)
    response = await callback(hitl_request(request, review))
    decision = parse_response(response, request, review.allowed)
    await apply_decision(request, decision)
    return response
