"""The one exception hierarchy of ipybox.

Every error ipybox raises in the application process derives from :class:`IpyboxError`, so
``except IpyboxError`` catches all of them. Errors raised *inside the kernel* (a tool error, a
rejected approval) are plain exceptions of :mod:`ipybox_core.runtime` and reach the application as
:class:`CodeError` information on the execution result.
"""

from __future__ import annotations


class IpyboxError(Exception):
    """Base class of every ipybox error."""


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


class McpServerError(IpyboxError):
    """An MCP server could not be reached, or failed at the protocol level."""

    def __init__(self, message: str, *, server: str) -> None:
        super().__init__(message)
        self.server = server


class McpConnectionError(McpServerError):
    """Connecting to an MCP server failed, or the connection was lost."""


class McpTimeout(McpServerError, TimeoutError):
    """An MCP server did not answer in time."""


class McpProtocolError(McpServerError):
    """An MCP server answered with a JSON-RPC error, or with a result that breaks the protocol.

    ``code`` is the JSON-RPC error code (``None`` for a malformed result), ``data`` its payload.
    """

    def __init__(self, message: str, *, server: str, code: int | None = None, data: object = None) -> None:
        super().__init__(message, server=server)
        self.code = code
        self.data = data


class ToolError(IpyboxError):
    """An MCP tool returned an error result (``isError``); carries the server's message."""

    def __init__(self, message: str, *, server: str, tool: str) -> None:
        super().__init__(message)
        self.server = server
        self.tool = tool


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
    """An approval request was answered twice, or answered after it expired."""
