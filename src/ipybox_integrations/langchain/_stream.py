"""Live output: the code's output goes to LangGraph's stream writer as it runs (``stream_mode="custom"``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal, overload

from typing_extensions import TypedDict

from ipybox_core.approval import ApprovalRequest
from ipybox_core.executor import Execution, ExecutionResult, OutputChunk
from ipybox_core.mcp.elicitation import ElicitationRequest
from ipybox_integrations._failures import EXECUTION_FAILURES
from ipybox_integrations._session import describe_failure
from ipybox_integrations.langchain._content import ExecuteCodeError
from ipybox_integrations.langchain._elicit import NOT_ASKED

StreamWriter = Callable[[Any], None]


class CodeOutput(TypedDict):
    """One chunk of ``execute_code`` output, as ``stream_mode="custom"`` receives it."""

    type: Literal["execute_code_output"]
    tool_call_id: str
    """The ``execute_code`` call that printed it."""
    stream: Literal["stdout", "stderr"]
    text: str


@overload
async def next_stop(
    execution: Execution, write: StreamWriter | None, tool_call_id: str
) -> ApprovalRequest | ExecutionResult: ...
@overload
async def next_stop(
    execution: Execution, write: StreamWriter | None, tool_call_id: str, *, questions: bool
) -> ApprovalRequest | ElicitationRequest | ExecutionResult: ...
async def next_stop(
    execution: Execution, write: StreamWriter | None, tool_call_id: str, *, questions: bool = False
) -> ApprovalRequest | ElicitationRequest | ExecutionResult:
    """Run until the code needs a decision or finishes, writing its output to ``write`` meanwhile.

    An MCP server's question is a stop with ``questions``; otherwise it is declined (:data:`NOT_ASKED`).
    An execution that ends without a result (timeout, dead kernel, cancelled) raises
    :class:`ExecuteCodeError` with its cause.
    """
    try:
        async for event in execution:
            if isinstance(event, (ApprovalRequest, ExecutionResult)):
                return event
            if isinstance(event, ElicitationRequest):
                if questions:
                    return event
                event.decline_unanswered(NOT_ASKED)
            if write is not None and isinstance(event, OutputChunk):
                write(
                    CodeOutput(
                        type="execute_code_output",
                        tool_call_id=tool_call_id,
                        stream=event.stream,
                        text=event.text,
                    )
                )
    except EXECUTION_FAILURES as error:
        raise ExecuteCodeError(describe_failure(error)) from error
    raise RuntimeError("the execution ended without a result")
