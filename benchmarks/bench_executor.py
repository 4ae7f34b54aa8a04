"""Executor benchmark: the cost ipybox adds to MCP tool calls and to starting up.

Run: ``.venv/bin/python benchmarks/bench_executor.py [--calls 200] [--rounds 5]``. Every figure is
measured in this run, variants interleaved so machine noise hits both alike.

1. Per-call overhead: ``--calls`` calls of the ``add`` tool from kernel code through ipybox
   (generated function → runtime → tool server → approval gate (policy "never") → MCP client →
   stdio server) against the same number of direct ``call_tool`` calls on an ``mcp.Client`` to the
   same kind of stdio server. Goal: ipybox adds <= 1.5 ms per call.
2. Cold start: ``CodeExecutor`` start (tool server + kernel, no pool) against a bare
   ``AsyncKernelManager.start_kernel`` + ``wait_for_ready``. Goal: ratio <= 1.3.
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

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parent.parent / "tests"))

from bench_kernel import BareKernel

from ipybox_core import CodeExecutor
from servers import PYTHON, SERVE_SCRIPT

#: Arguments for a seconds-long run that only checks the benchmark still works (tests/test_benchmarks.py).
TINY_ARGS = ["--calls", "2", "--rounds", "1"]

SERVER = {"command": PYTHON, "args": [str(SERVE_SCRIPT), "stdio"], "env": {"PYTHONUNBUFFERED": "1"}}
KERNEL_LOOP = """\
import time
from mcptools.bench import add
add(a=0, b=0)
_t = time.perf_counter()
for _i in range({calls}):
    add(a=_i, b=1)
print((time.perf_counter() - _t) / {calls})
"""


async def per_call(calls: int, rounds: int) -> tuple[list[float], list[float]]:
    """Seconds per call: (through ipybox, direct MCP client), one sample per round."""
    through: list[float] = []
    direct: list[float] = []
    params = StdioServerParameters(command=SERVER["command"], args=SERVER["args"], env=SERVER["env"])
    with tempfile.TemporaryDirectory() as ws:
        executor = CodeExecutor(workspace=ws, approval="never")
        async with executor as ex, Client(params, mode="legacy") as client:
            await ex.register_mcp_server("bench", SERVER)
            for _ in range(10):
                await client.call_tool("add", {"a": 0, "b": 0})
            for _ in range(rounds):
                result = await ex.execute(KERNEL_LOOP.format(calls=calls))
                through.append(float(result.text.strip()))
                start = time.perf_counter()
                for i in range(calls):
                    await client.call_tool("add", {"a": i, "b": 1})
                direct.append((time.perf_counter() - start) / calls)
    return through, direct


async def cold_starts(rounds: int) -> tuple[list[float], list[float]]:
    executor_times: list[float] = []
    bare_times: list[float] = []
    for _ in range(rounds):
        with tempfile.TemporaryDirectory() as ws:
            start = time.perf_counter()
            ex = CodeExecutor(workspace=ws)
            await ex.start()
            executor_times.append(time.perf_counter() - start)
            await ex.close()
        bare = BareKernel()
        start = time.perf_counter()
        await bare.start()
        bare_times.append(time.perf_counter() - start)
        await bare.stop()
    return executor_times, bare_times


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()

    through, direct = await per_call(args.calls, args.rounds)
    t, d = statistics.median(through), statistics.median(direct)
    print(f"per-call, {args.calls} calls x {args.rounds} rounds (medians of rounds)")
    print(f"  through ipybox (kernel code -> approval gate -> MCP): {t * 1000:.2f} ms/call")
    print(f"  direct mcp.Client.call_tool:                          {d * 1000:.2f} ms/call")
    print(f"  ipybox adds {(t - d) * 1000:.2f} ms per call (goal <= 1.5 ms); ratio {t / d:.2f}")

    ex_times, bare_times = await cold_starts(args.rounds)
    e, b = statistics.median(ex_times), statistics.median(bare_times)
    print(f"cold start, {args.rounds} interleaved rounds (medians)")
    print(f"  CodeExecutor start (tool server + kernel): {e * 1000:.0f} ms")
    print(f"  bare start_kernel + wait_for_ready:        {b * 1000:.0f} ms")
    print(f"  ratio {e / b:.2f} (goal <= 1.3)")


if __name__ == "__main__":
    asyncio.run(main())
