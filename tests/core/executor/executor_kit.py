"""Helpers for the executor tests: run code while deciding approvals the way a test wants."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest

from ipybox_core import ApprovalRequest, CodeExecutor, ExecutionResult, OutputChunk
from servers import PYTHON, SERVE_SCRIPT

Decide = Callable[[ApprovalRequest], Awaitable[None]]

STDIO_SERVER: dict[str, Any] = {
    "command": PYTHON,
    "args": [str(SERVE_SCRIPT), "stdio"],
    "env": {"PYTHONUNBUFFERED": "1"},
}


@asynccontextmanager
async def executor_on(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    server: dict[str, Any] = STDIO_SERVER,
    **options: Any,
) -> AsyncIterator[CodeExecutor]:
    """An executor with ``server`` registered as ``test``, on the backend ``request.param`` names:
    ``"local"`` or ``"gateway"`` (a real Jupyter Kernel Gateway)."""
    gateway: dict[str, Any] = {}
    if request.param == "gateway":
        kernel_gateway = request.getfixturevalue("kernel_gateway")
        gateway = {"kernel_gateway": kernel_gateway.url, "gateway_token": kernel_gateway.token}
    async with CodeExecutor(workspace=tmp_path_factory.mktemp("ws"), **options, **gateway) as ex:
        await ex.register_mcp_server("test", server)
        yield ex


async def accept(request: ApprovalRequest) -> None:
    await request.accept()


@dataclass
class Run:
    result: ExecutionResult
    requests: list[ApprovalRequest] = field(default_factory=list)
    chunks: list[OutputChunk] = field(default_factory=list)

    @property
    def text(self) -> str:
        return self.result.text


async def run(
    executor: CodeExecutor, code: str, decide: Decide = accept, timeout: float | None = None
) -> Run:
    """Stream ``code``, answering each approval request with ``decide``."""
    requests: list[ApprovalRequest] = []
    chunks: list[OutputChunk] = []
    result: ExecutionResult | None = None
    async with executor.stream(code, timeout=timeout) as execution:
        async for event in execution:
            if isinstance(event, ApprovalRequest):
                requests.append(event)
                await decide(event)
            elif isinstance(event, OutputChunk):
                chunks.append(event)
            elif isinstance(event, ExecutionResult):
                result = event
    assert result is not None
    return Run(result, requests, chunks)
