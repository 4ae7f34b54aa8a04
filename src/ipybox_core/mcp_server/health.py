"""Liveness and readiness of the service, for a load balancer or a container orchestrator.

``GET /healthz`` answers ``200`` while the process serves HTTP (live). ``GET /readyz`` answers
``200`` once the service can take conversations — the kernels' pool has started (its warm kernels
filled) and every MCP server of the config file is connected — and ``503`` until then, or for
good when a config server failed to start. Both answer without the bearer token and tell nothing
but that state (server names and why one failed, as JSON); every other request goes on to the app.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Protocol

from starlette.types import ASGIApp, Receive, Scope, Send

LIVE_PATH = "/healthz"
READY_PATH = "/readyz"


@dataclass(frozen=True)
class Readiness:
    """Whether the service can take conversations, and if not, why."""

    ready: bool
    reason: str | None = None
    failed_servers: dict[str, str] = field(default_factory=dict)
    """Config MCP servers that failed to start, with the first line of the error."""

    def as_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"status": "ready" if self.ready else "not ready"}
        if self.reason is not None:
            data["reason"] = self.reason
        if self.failed_servers:
            data["failed_servers"] = self.failed_servers
        return data


class Probe(Protocol):
    """What :class:`HealthEndpoints` asks (the service)."""

    def readiness(self) -> Readiness: ...


class HealthEndpoints:
    """ASGI middleware: answers ``GET``/``HEAD`` on :data:`LIVE_PATH` and :data:`READY_PATH`."""

    def __init__(self, app: ASGIApp, probe: Probe) -> None:
        self.app = app
        self.probe = probe

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path") if scope["type"] == "http" else None
        if path not in (LIVE_PATH, READY_PATH) or scope.get("method") not in ("GET", "HEAD"):
            await self.app(scope, receive, send)
            return
        if path == LIVE_PATH:
            status, data = 200, {"status": "live"}
        else:
            readiness = self.probe.readiness()
            status, data = (200 if readiness.ready else 503), readiness.as_json()
        body = json.dumps(data).encode()
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (b"cache-control", b"no-store"),
        ]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": b"" if scope.get("method") == "HEAD" else body})
