"""What ipybox knows about an MCP tool: shared by connections, code generation and approvals."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

DEFAULT_CONNECT_TIMEOUT = 30.0
"""Seconds to connect to an MCP server and list its tools, unless its config says otherwise."""
DEFAULT_CALL_TIMEOUT = 300.0
"""Seconds one MCP tool call may take, unless its server's config says otherwise."""


@dataclass(frozen=True)
class ToolAnnotations:
    """The MCP tool annotations (hints from the server; never a security boundary)."""

    title: str | None = None
    read_only_hint: bool | None = None
    destructive_hint: bool | None = None
    idempotent_hint: bool | None = None
    open_world_hint: bool | None = None


@dataclass(frozen=True)
class ToolInfo:
    """One tool as listed by an MCP server (schemas in JSON Schema wire form)."""

    name: str
    description: str = ""
    input_schema: dict[str, Any] = field(default_factory=lambda: {"type": "object", "properties": {}})
    output_schema: dict[str, Any] | None = None
    title: str | None = None
    annotations: ToolAnnotations = field(default_factory=ToolAnnotations)
    app_only: bool = False
    """An MCP Apps tool for the app's UI only (``_meta.ui.visibility`` without ``"model"``): it is
    left out of generated packages unless asked for."""
