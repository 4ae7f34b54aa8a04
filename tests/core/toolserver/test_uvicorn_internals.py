"""The uvicorn internals ipybox's HTTP listeners (``_http_limits``, ``_http_listener``) rely on.

``BoundedH11`` counts the open connections in ``self.connections`` (uvicorn's shared
``ServerState.connections``), and ``HttpListener.stop`` walks ``ServerState.connections`` /
``.tasks`` to shut connections and cancel waiting calls. uvicorn documents neither; if a release
changes them this test fails naming what changed, and pyproject.toml bounds the uvicorn range."""

from __future__ import annotations

import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.server import ServerState


async def _app(scope: object, receive: object, send: object) -> None:
    raise AssertionError("not called")


async def test_server_state_holds_the_connections_and_tasks_the_tool_server_walks() -> None:
    config = uvicorn.Config(_app, lifespan="off")
    config.load()
    server = uvicorn.Server(config)
    state = server.server_state
    assert isinstance(state, ServerState)
    assert isinstance(state.connections, set) and isinstance(state.tasks, set)

    protocol = H11Protocol(config, state, config.loaded_app)
    assert protocol.connections is state.connections, "H11Protocol no longer shares the connection set"
    assert callable(protocol.shutdown)
