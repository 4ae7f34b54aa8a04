"""Executors with the test MCP server, shared by the framework adapters' test packages."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

from ipybox_core import CodeExecutor
from servers import PYTHON, SERVE_SCRIPT, SERVERS_DIR

ELICIT_SERVER = {
    "command": PYTHON,
    "args": [str(SERVERS_DIR / "elicit_server.py")],
    "env": {"PYTHONUNBUFFERED": "1"},
}
"""The config of the stdio server whose tools ask their user questions (``elicit_server.py``)."""


@contextlib.asynccontextmanager
async def executor_with_test_server(workspace: Path) -> AsyncIterator[CodeExecutor]:
    """A kernel with the test MCP server registered as ``test`` (approval policy "always")."""
    async with CodeExecutor(workspace=workspace, timeout=60) as executor:
        await executor.register_mcp_server("test", {"command": PYTHON, "args": [str(SERVE_SCRIPT), "stdio"]})
        yield executor


@contextlib.asynccontextmanager
async def left_idle(executor: CodeExecutor) -> AsyncIterator[CodeExecutor]:
    """Lend a shared executor to one test, which must leave it idle (nothing running or waiting)."""
    yield executor
    left_busy = executor.busy
    await executor.cancel()
    assert not left_busy, "the test left an execution running or waiting for approval"
