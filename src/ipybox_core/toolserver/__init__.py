"""The tool server: kernel code's only way to MCP servers, through the approval gate."""

from ipybox_core.toolserver._app import ToolBackend, ToolCallOutcome
from ipybox_core.toolserver.server import HEARTBEAT_SECONDS, ToolServer

__all__ = ["HEARTBEAT_SECONDS", "ToolBackend", "ToolCallOutcome", "ToolServer"]
