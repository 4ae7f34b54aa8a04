"""Helpers for the session tests: the test MCP server's processes and kernels, counted with psutil."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import psutil

from servers import SERVE_SCRIPT


def _children() -> list[psutil.Process]:
    return psutil.Process().children(recursive=True)


def _cmdline(process: psutil.Process) -> list[str]:
    try:
        return process.cmdline()
    except (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied):
        return []


def server_pids() -> set[int]:
    """Processes of the stdio test MCP server started by this process."""
    return {p.pid for p in _children() if str(SERVE_SCRIPT) in _cmdline(p) and "stdio" in _cmdline(p)}


def kernel_pids() -> set[int]:
    """IPython kernel processes started by this process (sandboxed ones included)."""
    return {p.pid for p in _children() if "ipykernel_launcher" in _cmdline(p)}


async def eventually(condition: Callable[[], bool], what: str, limit: float = 60.0) -> None:
    """Wait until ``condition()`` holds (a generous limit: this checks an outcome, not a time)."""
    loop = asyncio.get_running_loop()
    end = loop.time() + limit
    while not condition():
        if loop.time() > end:
            raise AssertionError(f"never happened: {what}")
        await asyncio.sleep(0.05)
