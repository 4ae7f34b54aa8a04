"""What every framework adapter shares: sessions per conversation, the prompt section, results.

A framework adapter runs ``execute_code`` as an :class:`~ipybox_core.executor.Execution` and walks
its events (``execution.next_stop()``). When an MCP call needs a decision the framework must take
*outside* the tool call, the execution is parked in :class:`ipybox_core.suspended.SuspendedExecutions`
under (conversation, the framework's call id), and picked up again when the framework resumes with a
decision for that call. The conversation decides the kernel too: an adapter is given either one
:class:`CodeExecutor` (every conversation shares its kernel) or a :class:`SessionSource` such as
``ipybox_core.Sessions`` (one kernel per conversation key).
"""

from __future__ import annotations

import logging
from collections.abc import Collection
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from ipybox_core.approval import ApprovalRequest
from ipybox_core.errors import (
    ExecutionCancelled,
    ExecutionTimeout,
    ExecutorBusy,
    KernelDied,
    ServiceError,
)
from ipybox_core.executor import CodeExecutor, Execution, ExecutionResult
from ipybox_core.remote import RemoteExecutor, RemoteSessions

logger = logging.getLogger(__name__)

Executor = CodeExecutor | RemoteExecutor
"""A conversation's executor: in this process, or in an ipybox service (``RemoteSessions``)."""

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

ABANDONED_MESSAGE = (
    "Note: the earlier execute_code call was abandoned without a decision; its pending tool call did not "
    "run and the rest of that code was stopped. Kernel state from before that call is kept."
)
"""What the model is told when the conversation moved on while an execute_code call waited."""


DEFAULT_SESSION_KEY = "default"
"""The conversation key used when the framework names no conversation."""


@runtime_checkable
class Session(Protocol):
    """One conversation's kernel, as a :class:`SessionSource` hands it out."""

    @property
    def key(self) -> str: ...

    @property
    def executor(self) -> Executor: ...

    def take_restart_notice(self) -> str | None:
        """A sentence for the model when this conversation's kernel was restarted (once), else None."""
        ...


@runtime_checkable
class SessionSource(Protocol):
    """Hands out one session (kernel) per conversation key: ``ipybox_core.Sessions`` is one."""

    async def session(self, key: str) -> Session: ...

    def api_reference(self, *, max_chars: int | None = None) -> str: ...


@dataclass(frozen=True)
class _SharedSession:
    key: str
    executor: CodeExecutor

    def take_restart_notice(self) -> str | None:
        return None


class Conversations:
    """What an adapter was given, as sessions by conversation key.

    A :class:`CodeExecutor` is one session shared by every conversation (parked executions are still
    keyed by conversation); a :class:`SessionSource` gives each conversation key its own.
    """

    def __init__(self, source: CodeExecutor | SessionSource) -> None:
        if isinstance(source, CodeExecutor):
            self.executor: CodeExecutor | None = source
            self.source: SessionSource | None = None
        elif isinstance(source, SessionSource):
            self.executor = None
            self.source = source
        else:
            raise TypeError(f"expected a CodeExecutor or a Sessions object, got {type(source).__name__}")

    @property
    def in_service(self) -> bool:
        """True when the kernels live in an ipybox service (``RemoteSessions``)."""
        return isinstance(self.source, RemoteSessions)

    async def session(self, key: str | None) -> Session:
        key = key or DEFAULT_SESSION_KEY
        if self.source is not None:
            return await self.source.session(key)
        assert self.executor is not None
        return _SharedSession(key, self.executor)

    def prompt_section(self, *, max_chars: int | None = None) -> str:
        return prompt_section(
            self.executor if self.executor is not None else self.source, max_chars=max_chars
        )


def parked_key(conversation: str, call_id: str) -> str:
    """The key of a parked execution: the conversation and the framework's call id."""
    return f"{conversation}\x00{call_id}"


def prompt_section(source: CodeExecutor | SessionSource | None, *, max_chars: int | None = None) -> str:
    """Kernel guidance plus ``source.api_reference()``: what an agent's instructions need.

    Computed on every call, so servers registered later appear in the next prompt.
    """
    if isinstance(source, CodeExecutor):
        reference = source.api_reference(max_chars=max_chars) if source.servers else NO_TOOLS_NOTE
    elif source is not None:
        reference = source.api_reference(max_chars=max_chars) or NO_TOOLS_NOTE
    else:
        reference = NO_TOOLS_NOTE
    return f"{KERNEL_GUIDE}\n## Python API of the MCP tools\n\n{reference}"


def with_notes(notes: list[str], text: str) -> str:
    """``text`` preceded by the notes the model must read first (restart, abandoned call)."""
    return "\n\n".join([*notes, text]) if notes else text


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


def start_execution(
    executor: Executor, code: str, timeout: float | None, *, call_id: str | None = None
) -> Execution | None:
    """Start ``code``, or return ``None`` when the executor is busy (tell the model: BUSY_MESSAGE).

    ``call_id`` (the framework's call id) names the execution in an ipybox service, so that another
    process can :func:`reattach` to it.
    """
    try:
        if isinstance(executor, RemoteExecutor):
            return executor.stream(code, timeout=timeout, call_id=call_id)
        return executor.stream(code, timeout=timeout)
    except ExecutorBusy:
        return None


async def cancel_in_service(
    source: CodeExecutor | SessionSource | None,
    key: str,
    *,
    calls: Collection[str] | None = None,
    keep: Collection[str] = (),
    reason: str | None = None,
) -> int:
    """When the kernels live in an ipybox service (``RemoteSessions``): cancel what waits there for
    an approval in conversation ``key``, parked by any process (only ``calls`` if given, never
    ``keep``); returns how many. Always 0 for kernels in this process."""
    if not isinstance(source, RemoteSessions):
        return 0
    session = await source.session(key or DEFAULT_SESSION_KEY)
    try:
        return await session.executor.cancel_waiting(calls=calls, keep=keep, reason=reason)
    except ServiceError as error:  # the waiting call stays until its approval times out
        logger.warning("ipybox: could not cancel what waits in the service for %r: %s", key, error)
        return 0


async def reattach(executor: Executor, call_id: str) -> Execution | None:
    """The execution of ``call_id`` that waits in an ipybox service although this process never
    parked it (it was started by another process), or ``None`` (always, for a local executor)."""
    if isinstance(executor, RemoteExecutor):
        return await executor.reattach(call_id)
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
