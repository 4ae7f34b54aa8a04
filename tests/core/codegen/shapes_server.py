"""A stdio MCP server whose schemas exercise what issue 27 left in code generation:

- ``label``: a plain ``string``, a ``contentEncoding: base64`` string and an ``anyOf`` of a bounded
  string and a bounded integer; echoes each JSON value as it arrived with its JSON type, and a call count
- ``draw_chart``, ``refresh_panel``: MCP Apps tools for the app's UI only (``visibility: ["app"]``)

    python shapes_server.py      MCP over stdin/stdout
"""

from __future__ import annotations

import json
from typing import Annotated, Any

from mcp.server import MCPServer
from pydantic import WithJsonSchema

_APP_ONLY = {"ui": {"resourceUri": "ui://shapes/chart.html", "visibility": ["app"]}}
EITHER = {"anyOf": [{"type": "string", "maxLength": 5}, {"type": "integer", "minimum": 0}]}


def build_server() -> MCPServer:
    mcp = MCPServer("ipybox-shapes")
    received: list[int] = []

    @mcp.tool()
    def label(
        text: Annotated[Any, WithJsonSchema({"type": "string"})] = None,
        image: Annotated[Any, WithJsonSchema({"type": "string", "contentEncoding": "base64"})] = None,
        value: Annotated[Any, WithJsonSchema(EITHER)] = None,
    ) -> str:
        """Label something: echoes the JSON values as they arrived (``[value, JSON type]``) and the call number."""
        received.append(1)
        kinds = {bool: "boolean", int: "integer", float: "float", str: "string"}
        values = {"text": text, "image": image, "value": value}
        echoed = {k: [v, kinds.get(type(v), type(v).__name__)] for k, v in values.items() if v is not None}
        return json.dumps({"call": len(received), **echoed})

    @mcp.tool(meta=_APP_ONLY)
    def draw_chart(series: str = "") -> str:
        """Called by the app's UI only."""
        return f"drawn {series}"

    @mcp.tool(meta=_APP_ONLY)
    def refresh_panel() -> str:
        """Called by the app's UI only."""
        return "refreshed"

    return mcp


if __name__ == "__main__":
    build_server().run()
