"""Scale benchmark: N concurrent executors on one machine, local kernels vs kernels on a Jupyter
Kernel Gateway (started here on loopback) vs N sessions of one ``Sessions``.

Run: ``.venv/bin/python benchmarks/bench_scale.py [--levels 1,4,16,32] [--calls 25] [--executions 10]``
(needs the ``gateway`` extra). Every figure is measured in this run; all backends use the same
MCP server (the test server over Streamable HTTP, one process for all executors) and
``approval="never"``, so the numbers show what the kernel backend costs.

Backends (``--backends``, default ``local,gateway``; ``sessions`` runs with ``local`` unless
``--no-sessions``):

- ``local``: N ``CodeExecutor`` started side by side (``START_CONCURRENCY`` at a time), each with
  its own connection to the MCP server; ``start s`` is the time to start them all.
- ``gateway``: the same with ``kernel_gateway=`` a local Jupyter Kernel Gateway.
- ``sessions``: one ``Sessions(warm=N)`` (its warm pool filled before the clock starts, no refill
  while measuring) and N conversations ``await sessions.session(key)`` at once; ``start s`` is
  the time until all N have their session (the acquire), and the MCP connection is the Sessions'
  one shared connection. Compared with ``local`` in the same run (``sessions / local``).

Per level N and backend:

- tool calls: every executor runs one cell with ``--calls`` calls of the ``add`` tool, all N at the
  same time; latency is measured in the kernel around each call (generated function → runtime →
  tool server → approval gate → MCP client → server and back); throughput is all calls / wall time.
- executions: every executor runs ``--executions`` tiny cells one after another, all N at once;
  latency is measured in the application (``execute()`` round trip: websocket + gateway for the
  gateway backend, zmq for the local one).
- memory: mean RSS and PSS of a kernel process after it imported the generated API; the
  application's RSS growth per executor; the gateway's RSS growth per kernel.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

sys.path.insert(0, str(Path(__file__).parent.parent / "tests"))

from ipybox_core import CodeExecutor, Sessions
from servers.fixtures import start_http_test_server
from servers.gateway import LocalGateway, kernelgateway_available, start_local_gateway

T = TypeVar("T")
#: Arguments for a seconds-long run that only checks the benchmark still works (tests/test_benchmarks.py).
TINY_ARGS = ["--levels", "1", "--calls", "1", "--executions", "1", "--no-warm-up"]
START_CONCURRENCY = 4
WARM_UP = "import os\nfrom mcptools.bench import add\nadd(a=0, b=0)\nprint(os.getpid())"
CALL_LOOP = """\
import json, time
from mcptools.bench import add
_lat = []
for _i in range({calls}):
    _t = time.perf_counter()
    add(a=_i, b=1)
    _lat.append((time.perf_counter() - _t) * 1000)
print(json.dumps(_lat))
"""


@dataclass(frozen=True)
class Level:
    backend: str
    executors: int
    start_seconds: float
    calls_per_second: float
    call_ms: list[float]
    execute_ms: list[float]
    kernel_rss_mb: float
    kernel_pss_mb: float
    app_mb_per_executor: float
    gateway_mb_per_kernel: float | None


def percentile(values: Sequence[float], p: int) -> float:
    if len(values) < 2:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[p - 1]


def memory_mb(pid: int, field: str) -> float:
    """A ``kB`` field of /proc/<pid>/smaps_rollup (``Rss``, ``Pss``) in MiB."""
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    raise LookupError(field)


async def bounded(tasks: Sequence[Callable[[], Awaitable[T]]], limit: int) -> list[T]:
    semaphore = asyncio.Semaphore(limit)

    async def one(task: Callable[[], Awaitable[T]]) -> T:
        async with semaphore:
            return await task()

    return await asyncio.gather(*(one(task) for task in tasks))


async def timed_executions(executor: CodeExecutor, rounds: int) -> list[float]:
    times = []
    for i in range(rounds):
        start = time.perf_counter()
        await executor.execute(f"x = {i}")
        times.append((time.perf_counter() - start) * 1000)
    return times


async def session_executors(n: int, mcp_url: str, base: Path) -> tuple[Sessions, list[CodeExecutor], float]:
    """N sessions of one ``Sessions`` whose warm pool was filled first; the seconds their acquire took."""
    sessions = Sessions(
        root=base / f"sessions-{n}",
        warm=n,
        max_sessions=n,
        idle_timeout=None,
        mcp_servers={"bench": {"url": mcp_url}},
        approval="never",
        timeout=900,
    )
    await sessions.start()
    sessions.warm = 0  # no refill while the level is measured
    start = time.perf_counter()
    acquired = await asyncio.gather(*(sessions.session(f"conversation-{i}") for i in range(n)))
    return sessions, [session.executor for session in acquired], time.perf_counter() - start


async def run_level(
    backend: str, n: int, calls: int, executions: int, mcp_url: str, gateway: LocalGateway | None, base: Path
) -> Level:
    app_before = memory_mb(os.getpid(), "Rss")
    gateway_before = memory_mb(gateway.process.pid, "Rss") if gateway else 0.0
    sessions: Sessions | None = None
    executors: list[CodeExecutor] = []
    try:
        if backend == "sessions":
            sessions, executors, start_seconds = await session_executors(n, mcp_url, base)
        else:
            executors = [
                CodeExecutor(
                    workspace=base / f"{backend}-{n}-{i}",
                    approval="never",
                    timeout=900,
                    kernel_gateway=gateway.config() if gateway else None,
                )
                for i in range(n)
            ]
            start = time.perf_counter()
            await bounded([ex.start for ex in executors], START_CONCURRENCY)
            start_seconds = time.perf_counter() - start
            await asyncio.gather(*(ex.register_mcp_server("bench", {"url": mcp_url}) for ex in executors))
        warm = await bounded([lambda ex=ex: ex.execute(WARM_UP) for ex in executors], START_CONCURRENCY)
        pids = [int(result.text.strip()) for result in warm]
        rss = statistics.mean(memory_mb(pid, "Rss") for pid in pids)
        pss = statistics.mean(memory_mb(pid, "Pss") for pid in pids)
        app_growth = (memory_mb(os.getpid(), "Rss") - app_before) / n
        gateway_growth = (memory_mb(gateway.process.pid, "Rss") - gateway_before) / n if gateway else None

        start = time.perf_counter()
        results = await asyncio.gather(*(ex.execute(CALL_LOOP.format(calls=calls)) for ex in executors))
        wall = time.perf_counter() - start
        call_ms = [ms for result in results for ms in json.loads(result.text)]
        execute_ms = [
            ms
            for times in await asyncio.gather(*(timed_executions(ex, executions) for ex in executors))
            for ms in times
        ]
    finally:
        if sessions is not None:
            await sessions.aclose()
        else:
            await asyncio.gather(*(ex.close() for ex in executors), return_exceptions=True)
    return Level(
        backend=backend,
        executors=n,
        start_seconds=start_seconds,
        calls_per_second=len(call_ms) / wall,
        call_ms=call_ms,
        execute_ms=execute_ms,
        kernel_rss_mb=rss,
        kernel_pss_mb=pss,
        app_mb_per_executor=app_growth,
        gateway_mb_per_kernel=gateway_growth,
    )


def report(levels: list[Level]) -> None:
    print(
        f"{'backend':8} {'N':>3} {'start s':>8} {'calls/s':>8} {'call p50':>9} {'call p99':>9} "
        f"{'exec p50':>9} {'exec p99':>9} {'kernel RSS':>10} {'PSS':>6} {'app/exec':>9} {'gw/kernel':>9}"
    )
    for level in levels:
        per_kernel = level.gateway_mb_per_kernel
        gateway = f"{per_kernel:8.1f}M" if per_kernel is not None else "        -"
        print(
            f"{level.backend:8} {level.executors:3d} {level.start_seconds:8.3f} "
            f"{level.calls_per_second:8.0f} "
            f"{percentile(level.call_ms, 50):7.2f}ms {percentile(level.call_ms, 99):7.2f}ms "
            f"{percentile(level.execute_ms, 50):7.2f}ms {percentile(level.execute_ms, 99):7.2f}ms "
            f"{level.kernel_rss_mb:9.0f}M {level.kernel_pss_mb:5.0f}M "
            f"{level.app_mb_per_executor:8.1f}M {gateway}"
        )
    by_key = {(level.backend, level.executors): level for level in levels}
    for other in ("gateway", "sessions"):
        pairs = [(n, level, by_key.get(("local", n))) for (b, n), level in by_key.items() if b == other]
        pairs = [(n, level, local) for n, level, local in pairs if local is not None]
        if not pairs:
            continue
        print(f"{other} / local:")
        for n, level, local in pairs:
            assert local is not None
            print(
                f"  N={n:<3} start x{level.start_seconds / local.start_seconds:.3f}, "
                f"throughput x{level.calls_per_second / local.calls_per_second:.2f}, "
                f"call p50 x{percentile(level.call_ms, 50) / percentile(local.call_ms, 50):.2f}, "
                f"call p99 x{percentile(level.call_ms, 99) / percentile(local.call_ms, 99):.2f}, "
                f"exec p50 x{percentile(level.execute_ms, 50) / percentile(local.execute_ms, 50):.2f}"
            )


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--levels", default="1,4,16,32", help="numbers of concurrent executors")
    parser.add_argument("--calls", type=int, default=25, help="tool calls per executor and level")
    parser.add_argument("--executions", type=int, default=10, help="tiny executions per executor and level")
    parser.add_argument("--backends", default="local,gateway", help="local, gateway, sessions")
    parser.add_argument(
        "--no-warm-up",
        action="store_true",
        help="no unmeasured first executors per backend (they pay for imports); for a quick check only",
    )
    parser.add_argument(
        "--no-sessions", action="store_true", help="do not add the sessions backend next to local"
    )
    args = parser.parse_args()
    levels = [int(n) for n in args.levels.split(",")]
    backends = args.backends.split(",")
    if "local" in backends and "sessions" not in backends and not args.no_sessions:
        backends.insert(backends.index("local") + 1, "sessions")
    unknown = set(backends) - {"local", "gateway", "sessions"}
    if unknown:
        sys.exit(f"unknown backends: {', '.join(sorted(unknown))} (local, gateway, sessions)")
    if "gateway" in backends and not kernelgateway_available():
        sys.exit("the gateway backend needs the gateway extra: pip install 'ipybox[gateway]'")

    with tempfile.TemporaryDirectory(prefix="ipybox-bench-scale-") as tmp:
        base = Path(tmp)
        mcp = start_http_test_server(base / "mcp.log")
        gateway = start_local_gateway(base) if "gateway" in backends else None
        results: list[Level] = []
        try:
            for backend in [] if args.no_warm_up else backends:  # first executors pay for imports: no level
                await run_level(backend, 1, 2, 1, mcp.url, gateway if backend == "gateway" else None, base)
            for n in levels:  # backends interleaved per level, so machine noise hits both alike
                for backend in backends:
                    level = await run_level(
                        backend,
                        n,
                        args.calls,
                        args.executions,
                        mcp.url,
                        gateway if backend == "gateway" else None,
                        base,
                    )
                    results.append(level)
                    print(
                        f"  done: {backend} N={n} ({level.calls_per_second:.0f} calls/s)",
                        file=sys.stderr,
                        flush=True,
                    )
        finally:
            with contextlib.suppress(Exception):
                mcp.stop()
            if gateway is not None:
                gateway.stop()
    print(f"{args.calls} tool calls and {args.executions} executions per executor; {os.cpu_count()} CPUs")
    report(results)


if __name__ == "__main__":
    asyncio.run(main())
