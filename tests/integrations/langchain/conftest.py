"""One executor (kernel + the test MCP server as ``test``) shared by the LangChain tests of this package."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from ipybox_core import CodeExecutor
from servers import PYTHON, SERVE_SCRIPT


@pytest_asyncio.fixture(loop_scope="package", scope="package")
async def executor(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[CodeExecutor]:
    async with CodeExecutor(workspace=tmp_path_factory.mktemp("lc-ws"), timeout=60) as ex:
        await ex.register_mcp_server("test", {"command": PYTHON, "args": [str(SERVE_SCRIPT), "stdio"]})
        yield ex


@pytest_asyncio.fixture(loop_scope="package")
async def idle_executor(executor: CodeExecutor) -> AsyncIterator[CodeExecutor]:
    """The shared executor; a test must leave it idle (nothing running or waiting for approval)."""
    yield executor
    left_busy = executor.busy
    await executor.cancel()
    assert not left_busy, "the test left an execution running or waiting for approval"
