"""Run the test MCP server.

    python serve.py stdio [NAME]     MCP over stdin/stdout
    python serve.py http [NAME] [PORT]   Streamable HTTP on /mcp and SSE on /sse (+ /messages/), one
                                         process, on PORT (default: a free loopback port); prints
                                         "PORT <n>" once listening

Setting ``PYTHONUNBUFFERED=1`` keeps stray prints from leaking onto the stdio wire at exit.
"""

from __future__ import annotations

import socket
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from servers.tools import build_server


def serve_http(name: str, port: int = 0) -> None:
    """Serve Streamable HTTP and SSE from one Starlette app on a pre-bound loopback socket."""
    import uvicorn
    from starlette.applications import Starlette

    mcp = build_server(name)
    http_app = mcp.streamable_http_app(streamable_http_path="/mcp")
    sse_app = mcp.sse_app(sse_path="/sse", message_path="/messages/")
    app = Starlette(routes=[*http_app.routes, *sse_app.routes], lifespan=http_app.router.lifespan_context)

    # IPPROTO_TCP explicitly: asyncio sets TCP_NODELAY only on sockets whose proto is TCP; with the
    # default proto 0 the SSE transport suffers Nagle + delayed ACK (~40 ms per call).
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(128)  # connections queue from now on, so the port is usable as soon as it is printed
    print(f"PORT {sock.getsockname()[1]}", flush=True)
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on")
    uvicorn.Server(config).run(sockets=[sock])


def main() -> None:
    transport = sys.argv[1] if len(sys.argv) > 1 else "stdio"
    name = sys.argv[2] if len(sys.argv) > 2 else f"ipybox-test-{transport}"
    if transport == "stdio":
        build_server(name).run()
    elif transport == "http":
        serve_http(name, int(sys.argv[3]) if len(sys.argv) > 3 else 0)
    else:
        sys.exit(f"unknown transport {transport!r}; use stdio or http")


if __name__ == "__main__":
    main()
