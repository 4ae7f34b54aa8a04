"""Tools an executor uses without owning them: a :class:`~ipybox_core.sessions.Sessions` shares one
set of MCP connections and one generated API among the executors it makes."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ipybox_core.mcp import McpRegistry
from ipybox_core.toolserver import ToolBackend

if TYPE_CHECKING:
    from ipybox_core.executor.executor import RegisteredServer


@dataclass(frozen=True)
class SharedTools:
    """What :meth:`CodeExecutor._share_tools` hands an executor before it starts.

    ``backend`` answers the executor's tool server (shared connections, and the executor's own
    ``registry`` for per-session ones); ``servers`` are already generated into ``api_root``, which
    the executor neither writes nor removes. The executor closes only ``registry``, and calls
    ``finished`` (if given) whenever one of its executions ended.
    """

    backend: ToolBackend
    registry: McpRegistry
    servers: Mapping[str, RegisteredServer]
    api_root: Path
    finished: Callable[[], None] | None = None
