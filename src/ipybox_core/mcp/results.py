"""The result of one MCP tool call, in a transport-free form."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ipybox_core.errors import ToolError
from ipybox_core.mcp.types import ToolInfo

if TYPE_CHECKING:
    from mcp.types import CallToolResult


@dataclass(frozen=True)
class ToolCallResult:
    """What a tool returned (an ``isError`` result is raised as :class:`ToolError` instead).

    ``content`` holds every content block in MCP wire form (``{"type": "text", "text": ...}``,
    ``{"type": "image", "data": <base64>, "mimeType": "image/png"}``, ...). ``structured`` is the
    structured content the server sent (with or without an output schema), else ``None``.
    """

    content: list[dict[str, Any]] = field(default_factory=list)
    structured: Any = None
    notices: tuple[str, ...] = ()
    """What the caller should know besides the result, e.g. that the server was restarted first."""

    @property
    def text(self) -> str:
        """The text of all text blocks, one per line."""
        return content_text(self.content)

    @property
    def images(self) -> list[dict[str, Any]]:
        """The image blocks (base64 ``data`` and ``mimeType``)."""
        return [block for block in self.content if block.get("type") == "image"]


def content_text(content: list[dict[str, Any]]) -> str:
    """The text of the text blocks of MCP ``content`` (wire form), one per line."""
    return "\n".join(str(block.get("text", "")) for block in content if block.get("type") == "text")


def to_tool_call_result(result: CallToolResult, *, server: str, tool: ToolInfo) -> ToolCallResult:
    """Convert the SDK's result, raising :class:`ToolError` for an ``isError`` result."""
    content = [block.model_dump(by_alias=True, mode="json", exclude_none=True) for block in result.content]
    if result.is_error:
        message = content_text(content)
        raise ToolError(
            message or f"tool {tool.name!r} failed without a message", server=server, tool=tool.name
        )
    return ToolCallResult(content=content, structured=result.structured_content)


class ResultTooLarge(ToolError):
    """A tool's result was larger than its server's ``max_result_bytes``."""


_OVER_LIMIT = re.compile(r"exceeded the (\d+) byte limit")


def over_limit_message(limit: int) -> str:
    """The error text for a message over ``limit`` bytes (the wording the SDK's SSE reader uses)."""
    return f"the server's message exceeded the {limit} byte limit"


def is_over_limit(message: str) -> bool:
    """Whether a transport error ``message`` says a message was over the size limit."""
    return _OVER_LIMIT.search(message) is not None


def result_too_large(server: str, tool: str, limit: int) -> ResultTooLarge:
    """The error for a result over ``max_result_bytes``, naming the setting and how to raise it."""
    return ResultTooLarge(
        f"MCP server {server!r}: the result of {tool!r} is larger than max_result_bytes "
        f'({limit} bytes); ask for less (a page, a filter) or raise "max_result_bytes" in the '
        f"server's config",
        server=server,
        tool=tool,
    )
