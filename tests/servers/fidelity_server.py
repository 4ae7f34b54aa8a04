"""A test MCP server shaped like the real servers that ipybox got wrong (issue 27), one tool each.

    python fidelity_server.py stdio          MCP over stdin/stdout
    python fidelity_server.py http [PORT]    Streamable HTTP on /mcp and SSE on /sse; prints "PORT <n>"

- ``open_document``: ``structuredContent`` without an ``outputSchema`` (a PDF server's ``requestId``)
- ``big_text``: a text result of ``megabytes`` MB (over the SDK's 1 MiB SSE event default)
- ``run_query``: a live server answering with a JSON-RPC error (a database's SQL error)
- ``schedule``: ``date-time``, ``date`` and ``uuid`` parameters and a ``number``, echoed as received
- ``set_flags``: a boolean and an integer, echoed as received (strict coercion)
- ``record``: integer, number, boolean, ``date-time`` and ``uuid`` parameters whose JSON values are
  echoed untouched, with their JSON types and a call count (what exactly arrived, and how often)
- ``paint``: a 30-value enum
- ``render_view``: an MCP Apps tool visible to the app only (``_meta.ui.visibility == ["app"]``)
"""

from __future__ import annotations

import datetime as dt
import json
import socket
import sys
import uuid
from typing import Annotated, Any, Literal

from mcp.server import MCPServer
from mcp.shared.exceptions import MCPError
from mcp.types import CallToolResult, TextContent
from pydantic import WithJsonSchema

Colour = Literal[
    "amber", "azure", "beige", "black", "blue", "bronze", "brown", "coral", "crimson", "cyan",
    "gold", "green", "grey", "indigo", "ivory", "khaki", "lavender", "lime", "magenta", "maroon",
    "navy", "olive", "orange", "pink", "plum", "purple", "red", "silver", "teal", "zinc",
]  # fmt: skip
COLOURS: list[str] = list(Colour.__args__)
QUERY_ERROR_CODE = -32050
"""The JSON-RPC error code ``run_query`` answers with (an application-defined server error)."""


def build_server(name: str = "ipybox-fidelity") -> MCPServer:
    mcp = MCPServer(name)

    @mcp.tool()
    def open_document(name: str) -> CallToolResult:
        """Open a document; the structured result carries the requestId the next call needs."""
        data = {"requestId": f"req-{name}", "pages": 3}
        return CallToolResult(
            content=[TextContent(type="text", text=f"opened {name}")], structured_content=data
        )

    @mcp.tool()
    def big_text(megabytes: float) -> str:
        """A text result of about ``megabytes`` MB."""
        return "x" * int(megabytes * 1_000_000)

    @mcp.tool()
    def run_query(sql: str) -> str:
        """Run SQL; a syntax error is answered as a JSON-RPC error, the server stays alive."""
        if sql.strip().lower().startswith("select"):
            return "1 row"
        raise MCPError(QUERY_ERROR_CODE, f"syntax error near {sql.split()[0]!r}", {"position": 1})

    @mcp.tool()
    def schedule(when: dt.datetime, day: dt.date, ident: uuid.UUID, factor: float = 1.0) -> str:
        """Schedule a job: echoes what it received."""
        return json.dumps(
            {"when": when.isoformat(), "day": day.isoformat(), "ident": str(ident), "factor": factor}
        )

    @mcp.tool()
    def set_flags(dry_run: bool, count: int) -> str:
        """Set flags: echoes what it received."""
        return json.dumps({"dry_run": dry_run, "count": count})

    received: list[int] = []

    @mcp.tool()
    def record(
        count: Annotated[Any, WithJsonSchema({"type": "integer"})] = None,
        factor: Annotated[Any, WithJsonSchema({"type": "number"})] = None,
        dry_run: Annotated[Any, WithJsonSchema({"type": "boolean"})] = None,
        when: Annotated[Any, WithJsonSchema({"type": "string", "format": "date-time"})] = None,
        ident: Annotated[Any, WithJsonSchema({"type": "string", "format": "uuid"})] = None,
    ) -> str:
        """Record values: echoes the JSON values as they arrived (``[value, JSON type]``) and the call number."""
        received.append(1)
        values = {"count": count, "factor": factor, "dry_run": dry_run, "when": when, "ident": ident}
        kinds = {bool: "boolean", int: "integer", float: "float", str: "string"}
        echoed = {k: [v, kinds.get(type(v), type(v).__name__)] for k, v in values.items() if v is not None}
        return json.dumps({"call": len(received), **echoed})

    @mcp.tool()
    def paint(colour: Colour) -> str:
        """Paint in one of 30 colours."""
        return f"painted {colour}"

    @mcp.tool(meta={"ui": {"resourceUri": "ui://fidelity/view.html", "visibility": ["app"]}})
    def render_view(page: int = 1) -> str:
        """Called by the app's UI only, to redraw its view."""
        return f"page {page}"

    return mcp


def serve_http(port: int) -> None:
    """Streamable HTTP and SSE from one Starlette app on a pre-bound loopback socket."""
    import uvicorn
    from starlette.applications import Starlette

    mcp = build_server()
    http_app = mcp.streamable_http_app(streamable_http_path="/mcp")
    sse_app = mcp.sse_app(sse_path="/sse", message_path="/messages/")
    app = Starlette(routes=[*http_app.routes, *sse_app.routes], lifespan=http_app.router.lifespan_context)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(128)
    print(f"PORT {sock.getsockname()[1]}", flush=True)
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on")
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    if sys.argv[1:2] == ["http"]:
        serve_http(int(sys.argv[2]) if len(sys.argv) > 2 else 0)
    else:
        build_server().run()
