"""What every framework adapter shares: the prompt section, suspended executions, result rendering.

A framework adapter runs ``execute_code`` as an :class:`~ipybox_core.executor.Execution` and walks
its events. When an MCP call needs a decision the framework must take *outside* the tool call (a
deferred approval, a LangGraph interrupt, an Agents SDK interruption), the execution is parked in
a :class:`SuspendedExecutions` registry under the framework's own call id, and picked up again when
the framework resumes with the decision.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

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
    hints = []
    if request.annotations.read_only_hint:
        hints.append("read-only")
    if request.annotations.destructive_hint:
        hints.append("destructive")
    hint = f" [{', '.join(hints)}]" if hints else ""
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


@dataclass
class SuspendedExecution:
    """An execution parked while the framework collects a decision for ``request``."""

    key: str
    execution: Execution
    request: ApprovalRequest | None
    parked_at: float = field(default_factory=time.monotonic)
    timer: asyncio.TimerHandle | None = field(default=None, repr=False)


class SuspendedExecutions:
    """Parked executions by the framework's key (a tool call id, a thread + call id, ...).

    An execution left parked longer than ``abandon_after`` seconds is cancelled (the kernel is
    interrupted, pending approvals rejected) by a timer, so an application that never comes back
    does not keep the executor busy; :meth:`aclose` cancels all of them. An execution that finished
    while parked (e.g. its approval timed out and the code went on) stays until it is taken, so its
    result still reaches the model.
    """

    def __init__(self, *, abandon_after: float | None = 3600.0) -> None:
        self.abandon_after = abandon_after
        self._parked: dict[str, SuspendedExecution] = {}

    def __contains__(self, key: str) -> bool:
        return key in self._parked

    def __len__(self) -> int:
        return len(self._parked)

    def get(self, key: str) -> SuspendedExecution | None:
        return self._parked.get(key)

    async def park(self, key: str, execution: Execution, request: ApprovalRequest | None) -> None:
        await self.sweep()
        previous = self._parked.pop(key, None)
        if previous is not None and previous.timer is not None:
            previous.timer.cancel()
        parked = SuspendedExecution(key=key, execution=execution, request=request)
        if self.abandon_after is not None:
            parked.timer = asyncio.get_running_loop().call_later(
                self.abandon_after, lambda: asyncio.ensure_future(self._expire(parked))
            )
        self._parked[key] = parked

    async def take(self, key: str) -> SuspendedExecution | None:
        """Remove and return the execution parked under ``key`` (``None`` if there is none)."""
        await self.sweep()
        parked = self._parked.pop(key, None)
        if parked is not None and parked.timer is not None:
            parked.timer.cancel()
        return parked

    async def sweep(self) -> None:
        """Cancel executions parked for longer than ``abandon_after`` (the timers normally do)."""
        if self.abandon_after is None:
            return
        now = time.monotonic()
        for parked in list(self._parked.values()):
            if now - parked.parked_at > self.abandon_after:
                await self._expire(parked)

    async def _expire(self, parked: SuspendedExecution) -> None:
        if self._parked.get(parked.key) is not parked:
            return  # taken (or replaced) meanwhile
        del self._parked[parked.key]
        if parked.timer is not None:
            parked.timer.cancel()
        if not parked.execution.done:
            with contextlib.suppress(Exception):
                await parked.execution.cancel("the suspended execution was abandoned")

    async def aclose(self) -> None:
        """Cancel every parked execution."""
        parked, self._parked = list(self._parked.values()), {}
        for item in parked:
            if item.timer is not None:
                item.timer.cancel()
            with contextlib.suppress(Exception):
                await item.execution.cancel("the suspended execution was abandoned")


def start_execution(executor: CodeExecutor, code: str, timeout: float | None) -> Execution | None:
    """Start ``code``, or return ``None`` when the executor is busy (tell the model: BUSY_MESSAGE)."""
    try:
        return executor.stream(code, timeout=timeout)
    except ExecutorBusy:
        return None


async def next_stop(execution: Execution) -> ApprovalRequest | ExecutionResult:
    """Run ``execution`` until it needs a decision or finishes (output chunks are skipped).

    Raises what the execution raises (ExecutionTimeout, KernelDied, ExecutionCancelled).
    """
    async for event in execution:
        if isinstance(event, (ApprovalRequest, ExecutionResult)):
            return event
    raise RuntimeError("the execution ended without a result")


async def events_until_stop(execution: Execution) -> AsyncIterator[object]:
    """Every event up to and including the next approval request or the result (for streaming UIs)."""
    async for event in execution:
        yield event
        if isinstance(event, (ApprovalRequest, ExecutionResult)):
            return


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
