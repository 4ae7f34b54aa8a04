"""CodeExecutor and the events of an execution."""

from ipybox_core.executor.events import DisplayOutput, ExecutionEvent, ExecutionResult, OutputChunk
from ipybox_core.executor.execution import Execution
from ipybox_core.executor.executor import DEFAULT_TIMEOUT, CodeExecutor, RegisteredServer

__all__ = [
    "DEFAULT_TIMEOUT",
    "CodeExecutor",
    "DisplayOutput",
    "Execution",
    "ExecutionEvent",
    "ExecutionResult",
    "OutputChunk",
    "RegisteredServer",
]
