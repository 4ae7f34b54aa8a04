"""The exceptions kernel code can get from a tool call, and the base of every ipybox error.

Kernel code imports them from :mod:`ipybox_core.errors` (``from ipybox_core.errors import
ToolError``), in a local kernel and in a kernel on a gateway alike. A rejected call raises the
built-in :class:`PermissionError`.
"""

from __future__ import annotations


class IpyboxError(Exception):
    """Base class of every ipybox error."""


class ToolError(IpyboxError):
    """An MCP tool failed while its server stayed connected; the message is the server's.

    Either the tool returned an error result (``isError``; ``code`` is ``None``) or the server
    answered the call with a JSON-RPC error (``code`` and ``data`` are the error's).
    """

    def __init__(
        self, message: str, *, server: str = "", tool: str = "", code: int | None = None, data: object = None
    ) -> None:
        super().__init__(message)
        self.server = server
        self.tool = tool
        self.code = code
        self.data = data


class McpServerError(IpyboxError, ConnectionError):
    """An MCP server could not be reached, lost the connection, or broke the protocol.

    The application reconnects on the next call, so calling again may succeed.
    """

    def __init__(self, message: str, *, server: str = "") -> None:
        super().__init__(message)
        self.server = server


class ToolTimeoutError(IpyboxError, TimeoutError):
    """The MCP server did not answer the tool call in time."""


class ToolServerUnavailable(IpyboxError, ConnectionError):
    """The tool server in the application process cannot be reached (or stopped answering)."""
