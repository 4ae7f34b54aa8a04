"""The tool server: kernel code's only way to MCP servers, through the approval gate."""

from ipybox_core.toolserver._app import MAX_JSON_DEPTH, ToolBackend, ToolCallOutcome
from ipybox_core.toolserver.server import (
    HEARTBEAT_SECONDS,
    IDLE_TIMEOUT,
    MAX_CONNECTIONS,
    MAX_REQUEST_BYTES,
    ToolServer,
)

__all__ = [
    "HEARTBEAT_SECONDS",
    "IDLE_TIMEOUT",
    "MAX_CONNECTIONS",
    "MAX_JSON_DEPTH",
    "MAX_REQUEST_BYTES",
    "ToolBackend",
    "ToolCallOutcome",
    "ToolServer",
]
