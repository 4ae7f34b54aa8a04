"""Listing a server's tools (every page) as :class:`ToolInfo`."""

from __future__ import annotations

import warnings

from mcp import Client
from mcp.types import Tool

from ipybox_core.mcp._lenient import McpCompatibilityWarning
from ipybox_core.mcp.types import ToolAnnotations, ToolInfo

MAX_PAGES = 1000


def is_app_only(meta: object) -> bool:
    """Whether a tool's ``_meta`` makes it visible to an MCP App's UI only (``ui.visibility``
    lists audiences; absent or empty means both the model and the app)."""
    ui = meta.get("ui") if isinstance(meta, dict) else None
    visibility = ui.get("visibility") if isinstance(ui, dict) else None
    return isinstance(visibility, list) and bool(visibility) and "model" not in visibility


def tool_info(tool: Tool) -> ToolInfo:
    """The SDK's tool description as ipybox's :class:`ToolInfo` (schemas in wire form)."""
    hints = tool.annotations
    return ToolInfo(
        name=tool.name,
        description=tool.description or "",
        input_schema=tool.input_schema,
        output_schema=tool.output_schema,
        title=tool.title or (hints.title if hints else None),
        annotations=ToolAnnotations(
            title=hints.title,
            read_only_hint=hints.read_only_hint,
            destructive_hint=hints.destructive_hint,
            idempotent_hint=hints.idempotent_hint,
            open_world_hint=hints.open_world_hint,
        )
        if hints
        else ToolAnnotations(),
        app_only=is_app_only(tool.meta),
    )


async def list_all_tools(client: Client, *, server: str) -> list[ToolInfo]:
    """Every tool of the server, following ``nextCursor`` until the last page."""
    tools: dict[str, ToolInfo] = {}
    cursor: str | None = None
    seen_cursors: set[str] = set()
    for _ in range(MAX_PAGES):
        page = await client.list_tools(cursor=cursor, cache_mode="bypass")
        for tool in page.tools:
            if tool.name in tools:
                warnings.warn(
                    f"MCP server {server!r}: tool {tool.name!r} is listed twice; keeping the first",
                    McpCompatibilityWarning,
                    stacklevel=2,
                )
                continue
            tools[tool.name] = tool_info(tool)
        cursor = page.next_cursor
        if cursor is None:
            break
        if cursor in seen_cursors:
            warnings.warn(
                f"MCP server {server!r}: tools/list repeated the cursor {cursor!r}; stopped paging",
                McpCompatibilityWarning,
                stacklevel=2,
            )
            break
        seen_cursors.add(cursor)
    return list(tools.values())
