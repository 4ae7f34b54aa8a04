"""Tools an executor uses without owning them: a :class:`~ipybox_core.sessions.Sessions` shares one
set of MCP connections and one generated API among the executors it makes."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ipybox_core.mcp import McpRegistry
from ipybox_core.toolserver import ToolBackend

if TYPE_CHECKING:
    from ipybox_core.executor.executor import CodeExecutor, RegisteredServer
    from ipybox_core.mcp.config import McpServerConfig

Registrar = Callable[[str, "Mapping[str, Any] | McpServerConfig"], Awaitable["RegisteredServer"]]
"""What takes an executor's ``register_mcp_server`` calls when its servers belong to its owner."""


@dataclass(frozen=True)
class SharedTools:
    """MCP tools an executor uses without owning them: ``CodeExecutor(shared_tools=...)``.

    ``backend`` answers the executor's tool server (shared connections, and the executor's own
    ``registry`` for per-session ones); ``servers`` are already generated into ``api_root``, which
    the executor neither writes nor removes. The executor closes only ``registry``, and calls
    ``finished`` (if given) with itself whenever one of its executions ended.
    """

    backend: ToolBackend
    registry: McpRegistry
    servers: Mapping[str, RegisteredServer]
    api_root: Path
    finished: Callable[[CodeExecutor], None] | None = None
