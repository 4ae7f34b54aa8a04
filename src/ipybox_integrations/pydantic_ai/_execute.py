"""What ``execute_code`` does: run code, put every held call through PydanticAI's approvals, suspend.

One ``execute_code`` call runs one :class:`~ipybox_core.executor.Execution`. Each approval request
of the code is dispatched as a nested tool call (see :mod:`._nested`): a handler capability decides
it inline, any number of times per execution. When nothing decides it, the execution is parked under
the ``execute_code`` call id and the tool raises ``ApprovalRequired``: the run ends with
``DeferredToolRequests`` while the kernel waits, and the next run's ``DeferredToolResults`` resumes
the same execution — once per held call.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterable
from typing import Any

from pydantic_ai import ApprovalRequired, BinaryContent, ModelRetry, RunContext, ToolCallPart, ToolReturn
from pydantic_ai.exceptions import ToolFailed, ToolRetryError, UserError
from pydantic_ai.messages import CapabilityEvent, ModelRequestPart, ToolReturnPart

from ipybox_core.approval import ApprovalRequest
from ipybox_core.errors import ExecutionCancelled, ExecutionTimeout, KernelDied
from ipybox_core.executor import CodeExecutor, Execution, ExecutionResult, OutputChunk
from ipybox_core.suspended import SuspendedExecutions
from ipybox_integrations._session import (
    BUSY_MESSAGE,
    approval_description,
    describe_failure,
    render_result,
    start_execution,
)
from ipybox_integrations.pydantic_ai._nested import dispatch_held_call
from ipybox_integrations.pydantic_ai.approvals import (
    DEFAULT_REJECT_REASON,
    pending_approval,
    request_metadata,
)
from ipybox_integrations.pydantic_ai.events import ApprovalDecided, ApprovalRequested, CodeOutput

logger = logging.getLogger(__name__)

STALE_APPROVAL_MESSAGE = (
    "Error: this execute_code call no longer waits for an approval (it was abandoned, cancelled or the "
    "application restarted), so the approval was not applied. Kernel state is kept; run the remaining "
    "code again if it is still needed."
)
DENIED_REASON = "the user denied this execute_code call"
IGNORED_ANSWER_NOTE = (
    "an answer was ignored: a deferred approval must carry this request's approval_id in "
    "DeferredToolResults.metadata (build it with ipybox_integrations.pydantic_ai.approval_results)"
)
_REJECTING_ERRORS = (ToolFailed, ModelRetry, ToolRetryError)


class CodeRunner:
    """Runs ``execute_code`` calls on one executor and keeps the executions parked for approval."""

    def __init__(self, executor: CodeExecutor, *, timeout: float | None, abandon_after: float | None) -> None:
        self.executor = executor
        self.timeout = timeout
        self.suspended: SuspendedExecutions = SuspendedExecutions(abandon_after=abandon_after)

    # --- the tool ---------------------------------------------------------------------------

    async def execute_code(self, ctx: RunContext[Any], code: str) -> ToolReturn | str:
        key = ctx.tool_call_id or "execute_code"
        parked = self.suspended.take(key)  # even if it finished meanwhile (an approval timed out)
        if parked is None:
            if ctx.tool_call_approved:
                return STALE_APPROVAL_MESSAGE
            execution = start_execution(self.executor, code, self.timeout)
            if execution is None:
                return BUSY_MESSAGE
        else:
            execution = parked.execution
        try:
            if parked is not None and parked.request is not None and parked.request.pending:
                await self._answer_deferred(ctx, execution, parked.request)
            return await self._drive(ctx, execution)
        except ApprovalRequired:
            raise
        except BaseException:
            if not execution.done:
                await asyncio.shield(execution.cancel("execute_code failed"))
            raise

    async def _drive(self, ctx: RunContext[Any], execution: Execution) -> ToolReturn | str:
        try:
            async for event in execution:
                if isinstance(event, OutputChunk):
                    await _emit(ctx, CodeOutput(text=event.text, stream=event.stream))
                elif isinstance(event, ApprovalRequest):
                    await self._decide(ctx, execution, event)
                elif isinstance(event, ExecutionResult):
                    return tool_return(event)
        except (ExecutionTimeout, KernelDied, ExecutionCancelled) as error:
            return describe_failure(error)
        raise RuntimeError("the execution ended without a result")

    # --- approvals --------------------------------------------------------------------------

    async def _decide(self, ctx: RunContext[Any], execution: Execution, request: ApprovalRequest) -> None:
        """Decide ``request`` inline through the run's handlers, or park the execution and defer."""
        key = ctx.tool_call_id or "execute_code"
        call = held_call(key, request)
        metadata = request_metadata(request, execute_code_call_id=key, tool_call_id=call.tool_call_id)
        await _emit(ctx, ApprovalRequested(approval=pending_approval(call.tool_call_id, metadata)))
        try:
            denied = await dispatch_held_call(
                ctx, request, call, metadata, description=self._describe(request)
            )
        except ApprovalRequired:
            self.suspended.park(key, execution, request, None)  # interrupted once abandoned
            raise ApprovalRequired(metadata=metadata) from None
        except _REJECTING_ERRORS as error:
            denied_reason: str | None = _error_message(error)
        else:
            denied_reason = denied.message if denied is not None else None
        await self._finish(ctx, request, denied_reason)

    async def _answer_deferred(
        self, ctx: RunContext[Any], execution: Execution, request: ApprovalRequest
    ) -> None:
        """Apply the ``DeferredToolResults`` answer to the parked ``request``, or ask again."""
        key = ctx.tool_call_id or "execute_code"
        call = held_call(key, request)
        metadata = request_metadata(request, execute_code_call_id=key, tool_call_id=call.tool_call_id)
        answer = ctx.tool_call_metadata if ctx.tool_call_approved else None
        valid = isinstance(answer, dict) and answer.get("approval_id") == request.id
        decision = answer.get("decision", "approve") if isinstance(answer, dict) else None
        if not valid or decision not in ("approve", "reject"):
            if ctx.tool_call_approved:
                logger.warning("ipybox: %s (execute_code call %s)", IGNORED_ANSWER_NOTE, key)
                metadata = {**metadata, "note": IGNORED_ANSWER_NOTE}
            self.suspended.park(key, execution, request, None)  # interrupted once abandoned
            raise ApprovalRequired(metadata=metadata)
        assert isinstance(answer, dict)
        if decision == "reject":
            await self._finish(ctx, request, str(answer.get("reason") or DEFAULT_REJECT_REASON))
            return
        arguments = answer.get("arguments")
        if isinstance(arguments, dict):
            call = ToolCallPart(call.tool_name, dict(arguments), tool_call_id=call.tool_call_id)
        try:
            denied = await dispatch_held_call(
                ctx, request, call, metadata, description=self._describe(request), approved=True
            )
        except _REJECTING_ERRORS as error:
            await self._finish(ctx, request, _error_message(error))
        else:
            await self._finish(ctx, request, denied.message if denied is not None else None)

    async def _finish(
        self, ctx: RunContext[Any], request: ApprovalRequest, denied_reason: str | None
    ) -> None:
        """Reject ``request`` if it was denied, and tell the event stream how it was decided."""
        if denied_reason is not None and request.pending:
            await request.reject(denied_reason)
        decision = request.decision
        approved = decision is not None and decision.approved
        reason = None if approved or decision is None else decision.reason
        await _emit(
            ctx, ApprovalDecided(approval_id=request.id, name=request.name, approved=approved, reason=reason)
        )

    def _describe(self, request: ApprovalRequest) -> str:
        registered = self.executor.servers.get(request.server)
        if registered is not None:
            with contextlib.suppress(KeyError):
                return registered.package.tool(request.tool).description or approval_description(request)
        return approval_description(request)

    # --- parking ----------------------------------------------------------------------------

    async def cancel_denied(self, parts: Iterable[ModelRequestPart]) -> None:
        """Interrupt parked executions whose ``execute_code`` call was answered with ``ToolDenied``."""
        if not len(self.suspended):
            return
        for part in parts:
            if (
                isinstance(part, ToolReturnPart)
                and part.outcome == "denied"
                and part.tool_call_id in self.suspended
            ):
                parked = self.suspended.take(part.tool_call_id)
                if parked is not None:
                    await parked.execution.cancel(DENIED_REASON)


def held_call(execute_code_call_id: str, request: ApprovalRequest) -> ToolCallPart:
    """The nested tool call standing for ``request``: named after the MCP tool, with its arguments."""
    return ToolCallPart(
        request.tool, dict(request.args), tool_call_id=f"{execute_code_call_id}__{request.id[:12]}"
    )


def tool_return(result: ExecutionResult) -> ToolReturn:
    """The model-facing return of an execution: output or traceback text, then PNG images."""
    rendered = render_result(result)
    images = [BinaryContent(png, media_type="image/png") for png in rendered.images]
    value: str | list[Any] = [rendered.text, *images] if images else rendered.text
    metadata = {
        "execution_count": result.execution_count,
        "error": result.error.ename if result.error is not None else None,
        "images": len(images),
    }
    return ToolReturn(return_value=value, metadata=metadata)


def _error_message(error: BaseException) -> str:
    return getattr(error, "message", None) or str(error) or type(error).__name__


async def _emit(ctx: RunContext[Any], event: CapabilityEvent) -> None:
    """Emit into the run's event stream (skipped where the context has none, e.g. direct toolset use)."""
    with contextlib.suppress(UserError):
        await ctx.emit(event)
