"""Shared fixtures of the PydanticAI tests: one kernel with the test MCP server for the directory."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from ipybox_core import CodeExecutor
from servers import PYTHON, SERVE_SCRIPT


@pytest_asyncio.fixture(loop_scope="package", scope="package")
async def shared_executor(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[CodeExecutor]:
    """A kernel with the test MCP server registered as ``test`` (every call needs approval)."""
    async with CodeExecutor(workspace=tmp_path_factory.mktemp("pai-ws"), timeout=60) as ex:
        await ex.register_mcp_server("test", {"command": PYTHON, "args": [str(SERVE_SCRIPT), "stdio"]})
        yield ex


@pytest_asyncio.fixture(loop_scope="package")
async def executor(shared_executor: CodeExecutor) -> AsyncIterator[CodeExecutor]:
    """The shared executor; a test must leave it idle (nothing running or waiting for approval)."""
    yield shared_executor
    left_busy = shared_executor.busy
    await shared_executor.cancel()
    assert not left_busy, "the test left an execution running or waiting for approval"
