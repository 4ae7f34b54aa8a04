"""Helpers for the executor tests: run code while deciding approvals the way a test wants."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from ipybox_core import ApprovalRequest, CodeExecutor, ExecutionResult, OutputChunk
from servers import PYTHON, SERVE_SCRIPT

Decide = Callable[[ApprovalRequest], Awaitable[None]]

STDIO_SERVER: dict[str, Any] = {
    "command": PYTHON,
    "args": [str(SERVE_SCRIPT), "stdio"],
    "env": {"PYTHONUNBUFFERED": "1"},
}


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
