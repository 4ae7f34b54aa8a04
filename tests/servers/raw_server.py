"""A hand-written stdio MCP server (no SDK, starts in ~50 ms) that is deliberately off-spec.

    python raw_server.py [--page-size N] [--mute] [--clean] [--drop-unknown] [--strict-output]

Its ``tools/list`` is paginated (``--page-size``, default 3) and mixes good tools with malformed
ones; some ``tools/call`` results are off-spec too. ``--mute`` reads requests and never answers
(for connect timeouts); ``--drop-unknown`` never answers methods it does not know, such as the
2026-07-28 ``server/discover`` probe (like some older servers); ``--clean`` lists only the well-formed tools (``echo``, ``video``,
``structured_only``, ``pid``, ``die``); ``--strict-output`` gives ``structured_only`` an output schema
that its result breaks (``answer`` must be a string) and adds ``structured``, whose result fits its
schema. Tools:

- ``echo``: well-formed; returns ``arguments["text"]`` as text
- ``no_type``: inputSchema without ``"type": "object"`` (repairable)
- ``array_input``: inputSchema of type array (not callable with keyword arguments: unrepairable)
- ``bad_output``: outputSchema whose root is not an object (output schema must be dropped)
- ``bad_annotations``: annotations of the wrong type (annotations must be dropped)
- ``video``: returns a content block of an unknown type
- ``structured_only``: returns structuredContent without content
- ``pid``: returns the server's pid as text; ``die``: exits immediately with code 7
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

OBJECT = {"type": "object", "properties": {}}
TOOLS: list[dict[str, Any]] = [
    {
        "name": "echo",
        "description": "Echo the text.",
        "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
    },
    {"name": "no_type", "inputSchema": {"properties": {"x": {"type": "string"}}}},
    {"name": "array_input", "inputSchema": {"type": "array", "items": {"type": "string"}}},
    {"name": "bad_output", "inputSchema": OBJECT, "outputSchema": {"type": "array"}},
    {"name": "bad_annotations", "inputSchema": OBJECT, "annotations": {"readOnlyHint": "very"}},
    {"name": "video", "inputSchema": OBJECT},
    {"name": "structured_only", "inputSchema": OBJECT},
    {"name": "pid", "inputSchema": OBJECT},
    {"name": "die", "inputSchema": OBJECT},
]

CLEAN_TOOLS = {"echo", "video", "structured_only", "pid", "die"}
ANSWER_SCHEMA = {"type": "object", "properties": {"answer": {"type": "integer"}}, "required": ["answer"]}
STRICT_TOOLS: list[dict[str, Any]] = [
    {"name": "structured", "inputSchema": OBJECT, "outputSchema": ANSWER_SCHEMA},
    {
        "name": "structured_only",
        "inputSchema": OBJECT,
        "outputSchema": {**ANSWER_SCHEMA, "properties": {"answer": {"type": "string"}}},
    },
]


def text(value: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": value}]}


def call_tool(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    if name == "echo":
        return text(str(arguments.get("text", "")))
    if name == "video":
        return {"content": [{"type": "video", "url": "https://example.invalid/v.mp4"}]}
    if name == "structured_only":
        return {"structuredContent": {"answer": 42}}
    if name == "structured":
        return {**text('{"answer": 42}'), "structuredContent": {"answer": 42}}
    if name == "pid":
        return text(str(os.getpid()))
    if name == "die":
        sys.stderr.write("raw server: dying on request\n")
        sys.stderr.flush()
        os._exit(7)
    return {**text(f"called {name}"), "isError": name not in {t["name"] for t in TOOLS}}


def answer(request: dict[str, Any], page_size: int) -> dict[str, Any]:
    method = request.get("method")
    params = request.get("params") or {}
    if method == "initialize":
        return {
            "result": {
                "protocolVersion": params.get("protocolVersion", "2025-06-18"),
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "raw", "version": "0"},
            }
        }
    if method == "ping":
        return {"result": {}}
    if method == "tools/list":
        start = int(params.get("cursor") or 0)
        page: dict[str, Any] = {"tools": TOOLS[start : start + page_size]}
        if start + page_size < len(TOOLS):
            page["nextCursor"] = str(start + page_size)
        return {"result": page}
    if method == "tools/call":
        return {"result": call_tool(params.get("name", ""), params.get("arguments") or {})}
    return {"error": {"code": -32601, "message": f"Method not found: {method}"}}


def main() -> None:
    args = sys.argv[1:]
    page_size = int(args[args.index("--page-size") + 1]) if "--page-size" in args else 3
    mute = "--mute" in args
    drop_unknown = "--drop-unknown" in args
    if "--clean" in args:
        TOOLS[:] = [tool for tool in TOOLS if tool["name"] in CLEAN_TOOLS]
    if "--strict-output" in args:
        strict = {tool["name"]: tool for tool in STRICT_TOOLS}
        TOOLS[:] = [strict.pop(tool["name"], tool) for tool in TOOLS] + list(strict.values())
    for line in sys.stdin:
        message = json.loads(line)
        if "id" not in message or "method" not in message or mute:
            continue  # notifications and responses need no answer
        reply = {"jsonrpc": "2.0", "id": message["id"], **answer(message, page_size)}
        if drop_unknown and "error" in reply:
            continue
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
