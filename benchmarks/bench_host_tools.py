"""Host tool benchmark: the per-call cost of an application function called from kernel code.

Run: ``.venv/bin/python benchmarks/bench_host_tools.py [--calls 300] [--rounds 5]``. Every figure
is measured in this run, the variants interleaved round by round so machine noise hits all alike.

The same ``add(a, b)`` is called ``--calls`` times per round, four ways:

==================  ===========================================================================
variant             what is timed
==================  ===========================================================================
host from code      ``from agent_tools import add`` in the kernel: generated function → runtime
                    → tool server → approval gate (policy "never") → the host tool's function
direct function     the same async function awaited in the application (no ipybox)
MCP from code       ``from mcptools.bench import add``: the same path, but to the stdio test
                    MCP server through the executor's MCP connection
MCP registry call   ``McpRegistry.call`` on the same kind of server from the application
==================  ===========================================================================

ipybox's overhead of a host call is *host from code - direct function*, that of an MCP call *MCP
from code - MCP registry call*. Goal (issue 24): the host overhead is within +0.5 ms of the MCP
overhead. The ratio *host from code / MCP from code* is printed too.

Measured 2026-12-03 on the shared 2-CPU machine with four other agents' test runs going (300 calls x
5 rounds, medians, three runs): host tool from code 0.57-1.56 ms, direct function 0.001 ms, MCP tool
from code 4.5-8.3 ms, ``McpRegistry.call`` 2.6-6.3 ms; ipybox's overhead 0.57-1.56 ms for a host
call against 1.9-2.2 ms for an MCP call (difference -0.4 to -1.3 ms: within the goal), ratio host /
MCP from code 0.13-0.19. A host call crosses two processes (kernel, application), an MCP call three.
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from ipybox_core import CodeExecutor
from ipybox_core.hosttools import HostCall, HostTool
from ipybox_core.mcp import McpRegistry

sys.path.insert(0, str(Path(__file__).parent))
from _agent_tool_round import SERVER, TINY_ARGS, arguments, kernel_round, report

__all__ = ["TINY_ARGS"]

ADD_ARGS = {
    "type": "object",
    "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
    "required": ["a", "b"],
}
KERNEL_ROUND = kernel_round(host="agent_tools.add", mcp="mcptools.bench.add")


async def add(call: HostCall) -> int:
    return int(call.arguments["a"]) + int(call.arguments["b"])


async def _timed(calls: int, call: Callable[[int], Awaitable[Any]]) -> float:
    start = time.perf_counter()
    for i in range(calls):
        await call(i)
    return (time.perf_counter() - start) / calls


async def measure(calls: int, rounds: int) -> dict[str, list[float]]:
    samples: dict[str, list[float]] = {"host": [], "direct": [], "mcp": [], "registry": []}
    tool = HostTool("add", add, "Add two integers.", ADD_ARGS, {"type": "integer"})
    with tempfile.TemporaryDirectory() as ws:
        async with (
            CodeExecutor(workspace=ws, approval="never", host_tools=[tool]) as ex,
            McpRegistry() as registry,
        ):
            await ex.register_mcp_server("bench", SERVER)
            await registry.add("bench", SERVER)
            for _ in range(10):
                await registry.call("bench", "add", {"a": 0, "b": 0})
            for _ in range(rounds):
                result = await ex.execute(KERNEL_ROUND.format(calls=calls))
                assert result.error is None, result.error
                for name, seconds in json.loads(result.text).items():
                    samples[name].append(seconds)
                samples["direct"].append(
                    await _timed(calls, lambda i: add(HostCall("add", {"a": i, "b": 1})))
                )
                samples["registry"].append(
                    await _timed(calls, lambda i: registry.call("bench", "add", {"a": i, "b": 1}))
                )
    return samples


def main() -> None:
    args = arguments(__doc__, calls=300)
    samples = asyncio.run(measure(args.calls, args.rounds))
    labels = {
        "host": "host tool from code",
        "direct": "direct function call",
        "mcp": "MCP tool from code",
        "registry": "MCP registry call",
    }
    median = report(samples, labels, args.calls, args.rounds)
    host_overhead = median["host"] - median["direct"]
    mcp_overhead = median["mcp"] - median["registry"]
    print(f"ipybox overhead: host call {host_overhead * 1e3:.3f} ms, MCP call {mcp_overhead * 1e3:.3f} ms")
    print(f"host - MCP overhead: {(host_overhead - mcp_overhead) * 1e3:+.3f} ms (goal: <= +0.5 ms)")
    print(f"ratio host from code / MCP from code: {median['host'] / median['mcp']:.2f}")


if __name__ == "__main__":
    main()
