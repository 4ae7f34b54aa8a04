"""The one exception hierarchy of ipybox.

Every error ipybox raises derives from :class:`IpyboxError`, so ``except IpyboxError`` catches all
of them. Kernel code imports the errors a tool call can raise from here too (``from
ipybox_core.errors import ToolError``), in a local kernel and on a gateway: :class:`ToolError`,
:class:`McpServerError`, :class:`ToolTimeoutError` and :class:`ToolServerUnavailable` are the classes
the kernel-side runtime raises (defined in :mod:`ipybox_core.inkernel.errors`); a rejected call raises
``PermissionError``. In the application an error of the code arrives as :class:`CodeError`
information on the execution result. This module imports nothing else: it is shipped into gateway
kernels.
"""

from __future__ import annotations

from ipybox_core.inkernel.errors import (
    IpyboxError,
    McpServerError,
    ToolError,
    ToolServerUnavailable,
    ToolTimeoutError,
)

__all__ = [
    "ApprovalError",
    "CodeError",
    "CodegenError",
    "ConfigError",
    "ExecutionCancelled",
    "ExecutionGone",
    "ExecutionTimeout",
    "ExecutorBusy",
    "ExecutorClosed",
    "IpyboxError",
    "KernelDied",
    "KernelError",
    "KernelStartError",
    "McpConnectionError",
    "McpProtocolError",
    "McpServerError",
    "McpTimeout",
    "SandboxError",
    "SandboxUnavailable",
    "ServiceError",
    "ToolError",
    "ToolServerUnavailable",
    "ToolTimeoutError",
    "UnknownToolError",
    "UnsafePathError",
]


class ConfigError(IpyboxError, ValueError):
    """A configuration is invalid: a malformed server config, a missing ``${VAR}``, a bad policy."""


# --- kernel -------------------------------------------------------------------------------------


class KernelError(IpyboxError):
    """Something went wrong with the IPython kernel process."""


class KernelStartError(KernelError):
    """The kernel could not be started or did not become ready in time."""


class KernelDied(KernelError):
    """The kernel process died (``os._exit``, a segfault, the OOM killer, a resource limit).

    The next execution starts a fresh kernel; all kernel state is lost.
    """

    def __init__(self, message: str, *, exit_code: int | None = None) -> None:
        super().__init__(message)
        self.exit_code = exit_code


class ExecutionTimeout(IpyboxError, TimeoutError):
    """Code ran longer than its timeout and was interrupted. Kernel state is kept."""

    def __init__(self, message: str, *, timeout: float) -> None:
        super().__init__(message)
        self.timeout = timeout


class ExecutionCancelled(IpyboxError):
    """The execution was cancelled by the application (``cancel()``); the kernel was interrupted."""


class ExecutorBusy(IpyboxError):
    """A second execution was started while one is still running or waiting for approval."""


class ExecutorClosed(IpyboxError):
    """The executor (or kernel) was used after ``close()``."""


class CodeError(IpyboxError):
    """The executed code raised an exception.

    ``ename``/``evalue`` are the exception's type name and message; ``traceback`` is a readable,
    ANSI-free traceback with ipybox-internal frames removed.
    """

    def __init__(self, ename: str, evalue: str, traceback: str) -> None:
        super().__init__(f"{ename}: {evalue}" if evalue else ename)
        self.ename = ename
        self.evalue = evalue
        self.traceback = traceback


# --- MCP ----------------------------------------------------------------------------------------


class McpConnectionError(McpServerError):
    """Connecting to an MCP server failed, or the connection was lost."""


class McpAuthorizationError(McpConnectionError):
    """An MCP server refused this client (HTTP 401/403), or its OAuth authorization failed; the
    message is one line naming the server and the fix."""


class McpTimeout(McpServerError, TimeoutError):
    """An MCP server did not answer in time."""


class McpProtocolError(McpServerError):
    """An MCP server answered with a result that breaks the protocol (a JSON-RPC error from a live
    server is a :class:`ToolError` instead).

    ``code`` is a JSON-RPC error code when there is one (``None`` for a malformed result), ``data``
    its payload.
    """

    def __init__(self, message: str, *, server: str, code: int | None = None, data: object = None) -> None:
        super().__init__(message, server=server)
        self.code = code
        self.data = data


class UnknownToolError(IpyboxError, LookupError):
    """A server or tool name is not registered."""


class CodegenError(IpyboxError):
    """Python code could not be generated for a tool schema."""


# --- sandbox ------------------------------------------------------------------------------------


class SandboxError(IpyboxError):
    """The sandbox could not be set up as asked."""


class SandboxUnavailable(SandboxError):
    """The OS sandbox cannot run on this machine; the message says why and how to fix it."""


class UnsafePathError(IpyboxError, OSError):
    """A file the application was to touch is a symlink, FIFO, device, hard link or otherwise not a
    plain file or directory (hostile code may have planted it): refused, never followed."""


# --- approvals ----------------------------------------------------------------------------------


class ApprovalError(IpyboxError):
    """An approval request was answered twice, or answered after it expired.

    ``decided_by`` names who answered first, when known (e.g. ``"client:worker-2"``).
    """

    def __init__(self, message: str = "", *, decided_by: str | None = None) -> None:
        super().__init__(message)
        self.decided_by = decided_by


# --- service ------------------------------------------------------------------------------------


class ServiceError(IpyboxError):
    """The ipybox service (``ipybox serve``) could not be reached, refused the token, or failed."""


class ExecutionGone(ServiceError):
    """The execution a decision or resume was meant for no longer exists: it was answered, expired or
    reset, or the service restarted. Nothing ran twice; run the code again if it is still needed.

    ``cause`` is why, when known: ``"restarted"`` (the service restarted meanwhile: its kernels are
    new), ``"cancelled"``, ``"expired"``, ``"answered"`` (by another client first), ``"timeout"``,
    ``"kernel_died"`` or ``"disconnected"`` (the request that ran the code ended while it ran), the
    message then in the model's words (:meth:`~ipybox_core.executor.Executor.ended`); ``None``: not
    known.
    """

    def __init__(self, message: str = "", *, cause: str | None = None) -> None:
        super().__init__(message)
        self.cause = cause
