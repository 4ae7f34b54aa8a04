"""Shared fixtures of the OpenAI Agents SDK tests: one executor, tracing off (no network)."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

os.environ["OPENAI_AGENTS_DISABLE_TRACING"] = "1"  # read once by the SDK: no trace export, ever

from agents import set_tracing_disabled

from ipybox_core import CodeExecutor
from servers import PYTHON, SERVE_SCRIPT

set_tracing_disabled(True)


@pytest_asyncio.fixture(loop_scope="package", scope="package")
async def executor(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[CodeExecutor]:
    """A kernel with the test MCP server registered as ``test`` (approval policy "always")."""
    async with CodeExecutor(workspace=tmp_path_factory.mktemp("oa-ws"), timeout=60) as ex:
        await ex.register_mcp_server("test", {"command": PYTHON, "args": [str(SERVE_SCRIPT), "stdio"]})
        yield ex


@pytest_asyncio.fixture(loop_scope="package")
async def idle_executor(executor: CodeExecutor) -> AsyncIterator[CodeExecutor]:
    """The shared executor; a test must leave it idle (nothing running or waiting for approval)."""
    yield executor
    left_busy = executor.busy
    await executor.cancel()
    assert not left_busy, "the test left an execution running or waiting for approval"
