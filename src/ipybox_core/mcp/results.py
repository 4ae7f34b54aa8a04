"""The result of one MCP tool call, in a transport-free form."""

from __future__ import annotations

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
    structured content when the tool declares an output schema, else ``None``.
    """

    content: list[dict[str, Any]] = field(default_factory=list)
    structured: Any = None
    notices: tuple[str, ...] = ()
    """What the caller should know besides the result, e.g. that the server was restarted first."""

    @property
    def text(self) -> str:
        """The text of all text blocks, one per line."""
        return "\n".join(block["text"] for block in self.content if block.get("type") == "text")

    @property
    def images(self) -> list[dict[str, Any]]:
        """The image blocks (base64 ``data`` and ``mimeType``)."""
        return [block for block in self.content if block.get("type") == "image"]


def to_tool_call_result(result: CallToolResult, *, server: str, tool: ToolInfo) -> ToolCallResult:
    """Convert the SDK's result, raising :class:`ToolError` for an ``isError`` result."""
    content = [block.model_dump(by_alias=True, mode="json", exclude_none=True) for block in result.content]
    if result.is_error:
        message = "\n".join(block["text"] for block in content if block.get("type") == "text")
        raise ToolError(
            message or f"tool {tool.name!r} failed without a message", server=server, tool=tool.name
        )
    structured = result.structured_content if tool.output_schema is not None else None
    return ToolCallResult(content=content, structured=structured)
