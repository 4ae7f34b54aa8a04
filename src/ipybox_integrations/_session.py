"""What every framework adapter shares: sessions per conversation, the prompt section, results.

A framework adapter runs ``execute_code`` as an :class:`~ipybox_core.executor.Execution` and walks
its events (``execution.next_stop()``). It is given a :class:`SessionSource` (one ``CodeExecutor``,
whose kernel every conversation shares; ``Sessions``; ``RemoteSessions``) and talks to each
conversation's :class:`Executor` only through that protocol: it never asks where the kernel runs.
An execution started with the framework's call id waits in its executor when an MCP call needs a
decision the framework takes *outside* the tool call, and is found again by that id
(``executor.reattach(call_id)``) from any adapter instance.
"""

from __future__ import annotations

import logging
from collections.abc import Collection
from dataclasses import dataclass

from ipybox_core import protocol
from ipybox_core.approval import ApprovalRequest
from ipybox_core.errors import ExecutorBusy, IpyboxError
from ipybox_core.executor import Execution, ExecutionResult
from ipybox_core.executor.contract import Executor, Session, SessionSource
from ipybox_core.hosttools import HOST_SERVER

__all__ = ["Executor", "Session", "SessionSource"]

logger = logging.getLogger(__name__)

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

BUSY_MESSAGE = protocol.BUSY_MESSAGE
ABANDONED_MESSAGE = protocol.MOVED_ON_MESSAGE
"""What the model is told when the conversation moved on while an execute_code call waited."""


DEFAULT_SESSION_KEY = "default"
"""The conversation key used when the framework names no conversation."""


class Conversations:
    """What an adapter was given, as sessions by conversation key (``"default"`` when the framework
    names no conversation)."""

    def __init__(self, source: SessionSource) -> None:
        if not isinstance(source, SessionSource):
            raise TypeError(
                f"expected a CodeExecutor, Sessions or RemoteSessions object, got {type(source).__name__}"
            )
        self.source = source

    async def session(self, key: str | None) -> Session:
        return await self.source.session(key or DEFAULT_SESSION_KEY)

    def prompt_section(self, *, max_chars: int | None = None) -> str:
        return prompt_section(self.source, max_chars=max_chars)


def parked_key(conversation: str, call_id: str) -> str:
    """The key of a parked execution: the conversation and the framework's call id."""
    return f"{conversation}\x00{call_id}"


def prompt_section(source: SessionSource | None, *, max_chars: int | None = None) -> str:
    """Kernel guidance plus ``source.api_reference()``: what an agent's instructions need.

    Computed on every call, so servers registered later appear in the next prompt.
    """
    reference = (source.api_reference(max_chars=max_chars) if source is not None else "") or NO_TOOLS_NOTE
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
    if request.server == HOST_SERVER:  # one of the application's own tools (host tools)
        return f"The code calls the agent's tool {request.tool}{hint}: {request.tool}({arguments})"
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

    ``call_id`` (the framework's call id) names the execution, so that :func:`reattach` finds it
    again from any adapter instance (over an ipybox service: from any process).
    """
    try:
        return executor.stream(code, timeout=timeout, call_id=call_id)
    except ExecutorBusy:
        return None


async def cancel_waiting(
    source: SessionSource,
    key: str,
    *,
    calls: Collection[str] | None = None,
    keep: Collection[str] = (),
    reason: str | None = None,
) -> int:
    """Cancel what waits for an approval in conversation ``key``, started by any adapter instance
    (over an ipybox service: by any process): only ``calls`` if given, never ``keep``. Returns how many."""
    session = await source.session(key or DEFAULT_SESSION_KEY)
    try:
        return await session.executor.cancel_waiting(calls=calls, keep=keep, reason=reason)
    except IpyboxError as error:  # the waiting call stays until its backstop ends it
        logger.warning("ipybox: could not cancel what waits for %r: %s", key, error)
        return 0


async def reattach(executor: Executor, call_id: str) -> Execution | None:
    """The execution of ``call_id`` that still waits for a decision, started by any adapter
    instance (over an ipybox service: by any process), or ``None``."""
    return await executor.reattach(call_id)


def describe_failure(error: BaseException) -> str:
    """A message for the model when an execution did not produce a result (its true cause)."""
    return protocol.failure_text(error)
