"""The agent's MCP servers' tools, callable from the code as ``from agent_tools import <tool>``.

The tools are listed the SDK's way (``Agent.get_mcp_tools``: each server's ``tool_filter``, the
agent's ``mcp_config``, the server's ``require_approval`` as the tool's ``needs_approval``, its
guardrails and ``failure_error_function``); a call from the code goes through the SDK's server
object, ``server.call_tool(name, arguments)``, on the connection the application opened
(``async with server:``). The code gets the result's structured content as data, its text
otherwise, or its content blocks (MCP wire form) when it holds more than text (images, ...).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from agents import FunctionTool
from agents.exceptions import UserError
from agents.mcp import MCPServer, MCPUtil

logger = logging.getLogger(__name__)

NOT_CONNECTED_MESSAGE = (
    "the agent's MCP server {server!r} is not connected: open it around the run "
    "(async with server: ... Runner.run(agent, ...)), as the Agents SDK requires"
)
_NOT_INITIALIZED = "Server not initialized"  # the SDK's UserError for a server never connected


class CallStopped(Exception):
    """The call ends with this message for the code, as is (not through the failure formatter)."""


@dataclass(frozen=True)
class McpTool:
    """One MCP tool of the agent's servers, as the SDK lists it for the run."""

    tool: FunctionTool
    """The SDK's conversion: its (public) name, description, approval, guardrails, formatter."""
    server: MCPServer
    name: str
    """The tool's own name on its server (what ``call_tool`` takes)."""
    input_schema: dict[str, Any] | None
    """The server's own input schema (``None``: not kept, the SDK's conversion stands in)."""
    output_schema: dict[str, Any] | None
    read_only: bool | None
    meta: dict[str, Any] | None
    """The tool's static ``_meta``, sent with each call like the SDK does."""

    def signature(self) -> str:
        """What the kernel's function is made of, and where its calls go."""
        fields = [self.tool.name, id(self.server), self.name, self.tool.description]
        fields += [self.input_schema, self.output_schema, self.read_only]
        return json.dumps(fields, sort_keys=True, default=str)


async def list_mcp_tools(agent: Any, context: Any, previous: Sequence[McpTool]) -> list[McpTool]:
    """The MCP tools of ``agent``'s servers for the run of ``context`` (``previous`` when the
    listing fails: the SDK's own listing of the run then reports the failure)."""
    servers: list[MCPServer] = list(getattr(agent, "mcp_servers", None) or ())
    if not servers or context is None:
        return []
    try:
        tools = await agent.get_mcp_tools(context)
    except Exception as error:
        logger.warning("ipybox: could not list the agent's MCP tools: %s: %s", type(error).__name__, error)
        known = {id(server) for server in servers}
        return [tool for tool in previous if id(tool.server) in known]
    found: list[McpTool] = []
    for tool in tools:
        binding = getattr(tool, "_mcp_tool_binding", None)
        if not isinstance(tool, FunctionTool) or binding is None:
            continue
        _, raw_name, index = binding
        server = servers[index or 0]
        raw = _raw_tool(server, raw_name)
        found.append(
            McpTool(
                tool=tool,
                server=server,
                name=raw_name,
                input_schema=_input_schema(raw),
                output_schema=getattr(raw, "output_schema", getattr(raw, "outputSchema", None)),
                read_only=_read_only(tool),
                meta=MCPUtil._extract_static_meta(raw) if raw is not None else None,
            )
        )
    return found


def _read_only(tool: FunctionTool) -> bool | None:
    """The tool's ``readOnlyHint`` for the executor's policy, only where the server asks no
    approval for it: an ``allow_read_only`` rule must not skip an approval the server requires."""
    if tool.needs_approval is not False:
        return None
    annotations = tool.mcp_annotations
    hint = getattr(annotations, "read_only_hint", getattr(annotations, "readOnlyHint", None))
    return hint if isinstance(hint, bool) else None


def _raw_tool(server: MCPServer, name: str) -> Any:
    """The MCP tool ``name`` as the server's last listing returned it (``None``: not kept)."""
    return next((tool for tool in server.cached_tools or () if tool.name == name), None)


def _input_schema(raw: Any) -> dict[str, Any] | None:
    """The server's own input schema: optional parameters keep their defaults (the code's
    arguments go to the server as given, whatever ``convert_schemas_to_strict`` made for the model)."""
    schema = getattr(raw, "input_schema", getattr(raw, "inputSchema", None))
    if not isinstance(schema, dict):
        return None
    return schema if "properties" in schema else {**schema, "properties": {}}


async def call_mcp_tool(entry: McpTool, context: Any, arguments: dict[str, Any]) -> Any:
    """Call ``entry`` through its server (meta as the SDK resolves it); its result as data.
    Raises :class:`CallStopped` for an error result or a server that is not connected."""
    server = entry.server
    resolved = await MCPUtil._resolve_meta(server, context, entry.name, arguments)
    meta = MCPUtil._merge_mcp_meta(resolved, entry.meta)
    try:
        if meta is None:
            result = await server.call_tool(entry.name, arguments)
        else:
            result = await server.call_tool(entry.name, arguments, meta=meta)
    except UserError as error:
        if str(error).startswith(_NOT_INITIALIZED):
            raise CallStopped(NOT_CONNECTED_MESSAGE.format(server=server.name)) from None
        raise
    return mcp_value(result, entry.output_schema)


def mcp_value(result: Any, output_schema: dict[str, Any] | None) -> Any:
    """A ``CallToolResult`` as the code gets it: structured content as data, else its text (JSON
    text parsed where the tool declares an output schema), else its content blocks (images ...).
    An error result raises :class:`CallStopped` with its text."""
    blocks = [block.model_dump(mode="json", by_alias=True, exclude_none=True) for block in result.content]
    text = "\n".join(block.get("text", "") for block in blocks if block.get("type") == "text")
    if getattr(result, "is_error", getattr(result, "isError", False)):
        raise CallStopped(text or "the MCP tool reported an error")
    structured = getattr(result, "structured_content", getattr(result, "structuredContent", None))
    if structured is not None:
        return structured
    if any(block.get("type") != "text" for block in blocks):
        return blocks
    if output_schema is not None:
        try:
            return json.loads(text)
        except ValueError:
            pass
    return text
