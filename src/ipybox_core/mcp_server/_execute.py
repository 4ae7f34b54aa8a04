"""``execute_code``: run code, deciding its MCP calls through the MCP client, and report the result."""

from __future__ import annotations

import asyncio
import secrets
from typing import TYPE_CHECKING, Any

from mcp.server.mcpserver import Context
from mcp_types import CallToolResult, InputRequiredResult, TextContent

from ipybox_core.approval import ApprovalRequest
from ipybox_core.errors import ExecutionCancelled, ExecutionTimeout, ExecutorBusy, KernelDied
from ipybox_core.mcp_server._results import execution_result, text_result
from ipybox_core.mcp_server.approvals import Approver, answer_action, apply_answer
from ipybox_core.mcp_server.service import ClientSession, IpyboxService, ParkedCall

if TYPE_CHECKING:  # imported by the service in the background: keeps the handshake fast
    from ipybox_core.executor import Execution

BUSY_MESSAGE = (
    "Error: another execute_code call is still running or waiting for the user's approval. Wait for "
    "its result before calling execute_code again (do not call it in parallel), or call `reset`."
)
GONE_MESSAGE = (
    "Error: the execution waiting for this approval is gone: nobody answered in time, `reset` was "
    "called, or the server restarted. Run the code again."
)


async def start(
    service: IpyboxService,
    approver: Approver,
    ctx: Context[Any, Any],
    session: ClientSession,
    code: str,
    timeout: float | None,
    max_chars: int,
) -> CallToolResult | InputRequiredResult:
    """A fresh call: start ``code`` in ``session``'s kernel and run it to its first stop."""
    executor = session.executor
    assert executor is not None
    try:
        execution = executor.stream(code, timeout=timeout)
    except ExecutorBusy:
        return text_result(BUSY_MESSAGE, error=True)
    result = await drive(service, approver, ctx, execution, ParkedCall(session.key, max_chars))
    if isinstance(result, CallToolResult) and (notice := session.take_restart_notice()) is not None:
        result.content.insert(0, TextContent(type="text", text=notice))
    return result


async def resume(
    service: IpyboxService, approver: Approver, ctx: Context[Any, Any], session: str | None, key: str
) -> CallToolResult | InputRequiredResult:
    """The client's retry of an ``InputRequiredResult``: apply the answer and continue the execution.

    Only the session that started the execution can resume it.
    """
    parked = service.parked.get(key)
    if parked is None or parked.context.session != session:
        return text_result(GONE_MESSAGE, error=True)
    service.parked.take(key)
    responses = ctx.input_responses or {}
    assert parked.request is not None  # parked only at an approval request
    await apply_answer(parked.request, answer_action(responses.get(parked.key)))
    return await drive(service, approver, ctx, parked.execution, parked.context)


async def drive(
    service: IpyboxService,
    approver: Approver,
    ctx: Context[Any, Any],
    execution: Execution,
    call: ParkedCall,
) -> CallToolResult | InputRequiredResult:
    """Run ``execution`` until it ends, or until the client must be asked in a new round."""
    try:
        while True:
            stop = await execution.next_stop()
            if not isinstance(stop, ApprovalRequest):
                return execution_result(stop, max_chars=call.max_chars)
            channel = approver.channel(ctx)
            if channel == "input_required":
                parked = service.parked.park(secrets.token_urlsafe(16), execution, stop, call)
                return InputRequiredResult(
                    input_requests={parked.key: approver.input_request(stop)}, request_state=parked.key
                )
            await approver.decide_now(stop, ctx, channel)
    except (ExecutionTimeout, KernelDied, ExecutionCancelled) as error:
        return text_result(_failure(error), error=True)
    except BaseException:
        # The request was cancelled or the connection lost: do not leave the code running.
        await asyncio.shield(execution.cancel("the MCP request was cancelled"))
        raise


def _failure(error: BaseException) -> str:
    if isinstance(error, ExecutionTimeout):
        return f"Error: {error}"
    if isinstance(error, KernelDied):
        return (
            f"Error: the kernel died ({error}). Its state is lost; the next execution starts a fresh kernel."
        )
    return "Error: the execution was cancelled (reset, or the server is shutting down)."
