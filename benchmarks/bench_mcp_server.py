"""``ipybox mcp`` startup: how long an MCP client (Claude Code) waits for it.

Run: ``.venv/bin/python benchmarks/bench_mcp_server.py [--runs 5]``. Every figure is measured in
this run, with the official MCP client over stdio (``mode="legacy"``, as Claude Code connects):

1. handshake: spawn to ``initialize`` answered, for ``ipybox mcp`` and, as the baseline, for a bare
   ``MCPServer`` with one tool (the floor set by Python start and ``import mcp``). Goal: ipybox
   within 1.5x of the bare server: its kernel starts in the background.
2. first result: spawn to the answer of ``execute_code("1 + 1")`` (the kernel is up).
3. shutdown: closing the client (the SDK waits for the ``ipybox mcp`` process to exit, which stops
   its kernel first).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

from mcp import Client, StdioServerParameters

#: Arguments for a seconds-long run that only checks the benchmark still works (tests/test_benchmarks.py).
TINY_ARGS = ["--runs", "1"]

BARE_SERVER = """\
from mcp.server import MCPServer
server = MCPServer("bare", log_level="WARNING")

@server.tool()
def add(a: int, b: int) -> int:
    return a + b

server.run()
"""


async def bare_handshake(script: Path) -> float:
    start = time.perf_counter()
    async with Client(StdioServerParameters(command=sys.executable, args=[str(script)]), mode="legacy"):
        return time.perf_counter() - start


async def ipybox_timings(workspace: Path) -> tuple[float, float, float]:
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "ipybox_core.cli", "mcp", "--workspace", str(workspace)]
    )
    start = time.perf_counter()
    async with Client(params, mode="legacy", read_timeout_seconds=120) as client:
        handshake = time.perf_counter() - start
        result = await client.call_tool("execute_code", {"code": "1 + 1"})
        first_result = time.perf_counter() - start
        assert not result.is_error
        closing = time.perf_counter()
    return handshake, first_result, time.perf_counter() - closing


async def main(runs: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "bare.py"
        script.write_text(BARE_SERVER)
        bare: list[float] = []
        ipybox: list[tuple[float, float, float]] = []
        for run in range(runs):  # interleaved, so that load changes hit both alike
            bare.append(await bare_handshake(script))
            ipybox.append(await ipybox_timings(Path(tmp) / f"ws{run}"))
    handshake = statistics.median(t[0] for t in ipybox)
    first = statistics.median(t[1] for t in ipybox)
    shutdown = statistics.median(t[2] for t in ipybox)
    baseline = statistics.median(bare)
    print(f"runs: {runs} (medians)")
    print(f"bare MCPServer handshake        {baseline:6.2f} s")
    print(
        f"ipybox mcp handshake            {handshake:6.2f} s   "
        f"ratio {handshake / baseline:.2f}x (goal <= 1.5x)"
    )
    print(f"ipybox mcp first execute_code   {first:6.2f} s   ratio {first / baseline:.2f}x")
    print(f"ipybox mcp shutdown             {shutdown:6.2f} s")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=5)
    asyncio.run(main(parser.parse_args().runs))
