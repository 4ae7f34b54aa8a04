"""CodeExecutor, the events of an execution, and the protocols adapters type against."""

from ipybox_core.executor._shared import SharedTools
from ipybox_core.executor.contract import Executor, SessionSource, ToolSummaries
from ipybox_core.executor.events import DisplayOutput, ExecutionEvent, ExecutionResult, OutputChunk, ToolCall
from ipybox_core.executor.execution import Execution
from ipybox_core.executor.executor import DEFAULT_TIMEOUT, CodeExecutor, RegisteredServer
from ipybox_core.executor.options import ExecutorOptions
from ipybox_core.mcp.elicitation import ElicitationAnswer, ElicitationRequest

__all__ = [
    "DEFAULT_TIMEOUT",
    "CodeExecutor",
    "DisplayOutput",
    "ElicitationAnswer",
    "ElicitationRequest",
    "Execution",
    "ExecutionEvent",
    "ExecutionResult",
    "Executor",
    "ExecutorOptions",
    "OutputChunk",
    "RegisteredServer",
    "SessionSource",
    "SharedTools",
    "ToolCall",
    "ToolSummaries",
]
