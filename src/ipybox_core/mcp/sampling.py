"""An upstream MCP server asks the application's LLM for a completion (``sampling/createMessage``).

ipybox has no LLM of its own: a sampling request goes to the application's ``sample`` callback
(``McpRegistry(sample=...)``, ``CodeExecutor(mcp_sample=...)``) as a :class:`SamplingRequest`,
answered with the MCP SDK's ``CreateMessageResult``. Without a callback the request is refused
with an error that names the option.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mcp.types import CreateMessageRequestParams, CreateMessageResult

__all__ = ["Sample", "SamplingRequest", "not_configured"]


@dataclass(frozen=True)
class SamplingRequest:
    """An MCP server asks for an LLM completion during a tool call."""

    server: str
    """The server's name in the registry (its key in ``mcpServers``)."""
    tool: str | None
    """The tool whose call asked (``None`` when several calls of the server were running)."""
    params: CreateMessageRequestParams
    """The request as the server sent it: messages, system prompt, ``max_tokens``, preferences."""


Sample = Callable[[SamplingRequest], Awaitable["CreateMessageResult"]]
"""The application's answer to a :class:`SamplingRequest`."""


def not_configured(server: str) -> str:
    """The error a server gets for a sampling request when the application has no ``sample``."""
    return (
        f"ipybox: sampling is not configured for MCP server {server!r}: the application passes "
        "McpRegistry(sample=...) or CodeExecutor(mcp_sample=...) to answer sampling requests"
    )
