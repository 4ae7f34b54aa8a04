"""The MCP server with the error codes the specification names for a request about a thing that
does not exist: an unknown tool or prompt is ``-32602`` (invalid params), a JSON-RPC error, where
the SDK answers an unknown tool with an ``isError`` result and an unknown prompt with code 0."""

from __future__ import annotations

from typing import Any

from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, CallToolResult, GetPromptResult, InputRequiredResult


class SpecErrorsServer(MCPServer[Any]):
    """:class:`MCPServer` whose unknown tools and prompts are protocol errors (``-32602``)."""

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Any = None
    ) -> CallToolResult | InputRequiredResult:
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError:  # the known tools are listed only then, not on every call
            if name not in {tool.name for tool in await self.list_tools()}:
                raise MCPError(INVALID_PARAMS, f"Unknown tool: {name}") from None
            raise

    async def get_prompt(
        self, name: str, arguments: dict[str, Any] | None = None, context: Any = None
    ) -> GetPromptResult | InputRequiredResult:
        if name not in {prompt.name for prompt in await self.list_prompts()}:
            raise MCPError(INVALID_PARAMS, f"Unknown prompt: {name}")
        return await super().get_prompt(name, arguments, context)
