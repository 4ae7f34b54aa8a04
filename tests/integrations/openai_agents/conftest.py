"""Shared fixtures of the OpenAI Agents SDK tests: one executor, tracing off (no network)."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

os.environ["OPENAI_AGENTS_DISABLE_TRACING"] = "1"  # read once by the SDK: no trace export, ever

from agents import set_tracing_disabled

from ipybox_core import CodeExecutor
from servers.executors import executor_with_test_server, left_idle

set_tracing_disabled(True)


@pytest_asyncio.fixture(loop_scope="package", scope="package")
async def executor(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[CodeExecutor]:
    """A kernel with the test MCP server registered as ``test`` (every call needs approval)."""
    async with executor_with_test_server(tmp_path_factory.mktemp("oa-ws")) as ex:
        yield ex


@pytest_asyncio.fixture(loop_scope="package")
async def idle_executor(executor: CodeExecutor) -> AsyncIterator[CodeExecutor]:
    """The shared executor; a test must leave it idle (nothing running or waiting for approval)."""
    async with left_idle(executor) as ex:
        yield ex
