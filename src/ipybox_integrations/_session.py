"""What every framework adapter shares: the prompt section, starting an execution, result rendering.

A framework adapter runs ``execute_code`` as an :class:`~ipybox_core.executor.Execution` and walks
its events (``execution.next_stop()``). When an MCP call needs a decision the framework must take
*outside* the tool call, the execution is parked in :class:`ipybox_core.suspended.SuspendedExecutions`
under the framework's own call id, and picked up again when the framework resumes with the decision.
"""

from __future__ import annotations

from dataclasses import dataclass

from ipybox_core.approval import ApprovalRequest
from ipybox_core.errors import ExecutionCancelled, ExecutionTimeout, ExecutorBusy, KernelDied
from ipybox_core.executor import CodeExecutor, Execution, ExecutionResult

EXECUTE_CODE_DESCRIPTION = (
    "Execute Python code in a stateful IPython kernel and return its output. Variables, imports and "
    "functions persist between calls. Top-level `await` works, `!cmd` runs shell commands, and "
    "plots/images displayed by the code (e.g. matplotlib) are returned as images. MCP tools are "
    "plain Python functions importable from the `mcptools` package (see the API reference in your "
    "instructions); each tool call may need the user's approval and raises PermissionError if rejected."
)

KERNEL_GUIDE = """\
## Code execution

You act by writing Python for the `execute_code` tool. The code runs in a stateful IPython kernel:
variables, imports and function definitions persist between calls, so build on earlier results
instead of repeating work. Print what you need to see (the value of the last expression is shown
too). Top-level `await` works. `!cmd` runs a shell command and `%%bash` a shell cell. Figures and
images you display (e.g. `plt.show()` with matplotlib) come back to you as images. If the code
raises, you get the traceback and can fix the code and try again.

Call MCP tools as Python functions. Process their results in code (filter, join, aggregate) and print
only what matters, rather than printing whole results. Every tool call may wait for the user's
approval; a rejected call raises `PermissionError` (with the user's reason) that your code may catch.
A failing tool raises `ToolError`. Use `help(function)` for a tool's full documentation.
"""

NO_TOOLS_NOTE = "No MCP tools are registered yet: only plain Python is available.\n"

BUSY_MESSAGE = (
    "Error: another execute_code call is still running or waiting for the user's approval. "
    "Wait for its result before calling execute_code again; do not call it in parallel."
)


def prompt_section(executor: CodeExecutor, *, max_chars: int | None = None) -> str:
    """Kernel guidance plus ``executor.api_reference()``: what an agent's instructions need.

    Computed on every call, so servers registered later appear in the next prompt.
    """
    reference = executor.api_reference(max_chars=max_chars) if executor.servers else NO_TOOLS_NOTE
    return f"{KERNEL_GUIDE}\n## Python API of the MCP tools\n\n{reference}"


def approval_description(request: ApprovalRequest) -> str:
    """A one-paragraph description of an approval request, for a human approver."""
    if request.kind == "shell":
        return f"The code wants to run the shell command: {request.args.get('command', '')}"
    arguments = ", ".join(f"{key}={value!r}" for key, value in request.args.items())
    hint = f" [{', '.join(request.hints)}]" if request.hints else ""
    return f"The code calls MCP tool {request.name}{hint}: {request.tool}({arguments})"


@dataclass(frozen=True)
class RenderedResult:
    """An execution result as a model sees it: text (output or traceback) and PNG images."""

    text: str
    images: list[bytes]
    failed: bool


def render_result(result: ExecutionResult) -> RenderedResult:
    """Turn an :class:`ExecutionResult` into text + images for a tool return value."""
    return RenderedResult(text=result.to_text(), images=list(result.images), failed=result.error is not None)


def start_execution(executor: CodeExecutor, code: str, timeout: float | None) -> Execution | None:
    """Start ``code``, or return ``None`` when the executor is busy (tell the model: BUSY_MESSAGE)."""
    try:
        return executor.stream(code, timeout=timeout)
    except ExecutorBusy:
        return None


def describe_failure(error: BaseException) -> str:
    """A message for the model when an execution did not produce a result."""
    if isinstance(error, ExecutionTimeout):
        return f"Error: the code timed out and was interrupted ({error}). Kernel state is kept."
    if isinstance(error, KernelDied):
        return (
            f"Error: the kernel died ({error}). Its state is lost; the next execution starts a fresh kernel."
        )
    if isinstance(error, ExecutionCancelled):
        return "Error: the execution was cancelled by the application."
    return f"Error: {type(error).__name__}: {error}"
