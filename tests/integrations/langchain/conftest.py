"""One executor (kernel + the test MCP server as ``test``) shared by the LangChain tests of this package."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from ipybox_core import CodeExecutor
from servers.executors import executor_with_test_server, left_idle


@pytest_asyncio.fixture(loop_scope="package", scope="package")
async def executor(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[CodeExecutor]:
    """A kernel with the test MCP server registered as ``test`` (every call needs approval)."""
    async with executor_with_test_server(tmp_path_factory.mktemp("lc-ws")) as ex:
        yield ex


@pytest_asyncio.fixture(loop_scope="package")
async def idle_executor(executor: CodeExecutor) -> AsyncIterator[CodeExecutor]:
    """The shared executor; a test must leave it idle (nothing running or waiting for approval)."""
    async with left_idle(executor) as ex:
        yield ex
