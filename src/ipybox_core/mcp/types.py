"""What ipybox knows about an MCP tool: shared by connections, code generation and approvals."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


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
