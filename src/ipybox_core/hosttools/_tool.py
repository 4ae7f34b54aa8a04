"""A host tool: an async function of the application that kernel code calls like an MCP tool."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from ipybox_core.mcp.types import ToolAnnotations, ToolInfo

HOST_SERVER = "agent_tools"
"""The server name of every host tool: the kernel imports them with ``from agent_tools import ...``;
approvals, the approval policy and the audit log see their calls as calls of this server."""

_ANY_RESULT: dict[str, Any] = {"type": "object", "properties": {"result": {}}, "required": ["result"]}


@dataclass(frozen=True)
class HostCall:
    """One call of a host tool, as its function receives it."""

    tool: str
    """The tool's (wire) name."""
    arguments: dict[str, Any]
    """The call's arguments, as validated against the input schema by the kernel."""
    context: Any = None
    """What the application bound for the running execution (:meth:`CodeExecutor.bind_tool_context`),
    e.g. a framework's run context; ``None`` when nothing is bound."""


HostFunction: TypeAlias = Callable[[HostCall], Awaitable[Any]]
"""Runs a host tool call in the application; returns a JSON-able value (a dict, list, str, number,
pydantic model, dataclass) or raises (the code gets :class:`~ipybox_core.errors.ToolError`)."""


@dataclass(frozen=True)
class HostTool:
    """A tool of the application that the kernel's code calls like an MCP tool.

    The kernel gets a typed function generated from ``input_schema``/``output_schema`` by the same
    code generation as MCP tools (``from agent_tools import <name>``); the call goes through the
    tool server and the approval gate like an MCP call (server :data:`HOST_SERVER`), then ``run``
    runs in the application process: the kernel never holds the tool's code. ``output_schema``
    (any JSON Schema) types the result; without one the code gets the returned value as JSON data
    (typed ``Any``). ``read_only`` is the MCP ``readOnlyHint`` the approval policy sees;
    ``timeout`` (seconds, default: the executor's ``call_timeout``) bounds one call.
    """

    name: str
    run: HostFunction
    description: str = ""
    input_schema: dict[str, Any] = field(default_factory=lambda: {"type": "object", "properties": {}})
    output_schema: dict[str, Any] | None = None
    read_only: bool | None = None
    timeout: float | None = None

    @property
    def wraps_result(self) -> bool:
        """True when the result travels as MCP's ``{"result": ...}`` (no schema or not an object)."""
        schema = self.output_schema
        return schema is None or schema.get("type") != "object"

    def info(self) -> ToolInfo:
        """The tool as code generation and the approval gate see an MCP tool."""
        schema = self.output_schema
        output = schema
        if schema is None:
            output = _ANY_RESULT
        elif self.wraps_result:
            inner = {key: value for key, value in schema.items() if key != "$defs"}
            output = {"type": "object", "properties": {"result": inner}, "required": ["result"]}
            if "$defs" in schema:  # at the top, where the "#/$defs/..." references point
                output["$defs"] = schema["$defs"]
        return ToolInfo(
            name=self.name,
            description=self.description,
            input_schema=self.input_schema,
            output_schema=output,
            annotations=ToolAnnotations(read_only_hint=self.read_only),
        )
