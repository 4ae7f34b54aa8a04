"""Connect time and call latency of ipybox's MCP connections, against the bare mcp SDK client.

    .venv/bin/python benchmarks/bench_mcp_connections.py [--calls N] [--warmup N] [--connects N]
        [--connect-modes M] [--discover-modes M]

For each transport (stdio, Streamable HTTP, SSE) it measures, in the same run:

- connect: spawn (stdio) + handshake + full tools/list, with ``McpRegistry.add`` vs ``mcp.Client``
  entered by hand, in ``legacy`` and ``auto`` mode (``--connect-modes``, default ``legacy,auto``);
- one call: ``McpRegistry.call`` vs ``Client.call_tool`` on an open connection (median and p90 of N
  sequential calls after ``--warmup`` calls, default 20), for an unstructured (``echo``) and a
  structured (``add``) tool, both on the same connection of each client;

and what the ``auto`` mode's ``server/discover`` probe costs against a server that never answers
unknown methods (10 s: leave ``auto`` out of ``--discover-modes``, default ``legacy,auto``, for a
quick run). Ratios are ipybox / SDK (1.00 = no overhead).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from mcp import Client, StdioServerParameters, stdio_client
from mcp.client.sse import sse_client

from ipybox_core.mcp import McpRegistry
from servers import PYTHON, RAW_SERVER_SCRIPT, SERVE_SCRIPT

#: Arguments for a seconds-long run that only checks the benchmark still works (tests/test_benchmarks.py).
#: The connects run in ``auto`` mode only: the calls' connections are ``legacy`` ones.
TINY_ARGS = [
    *["--calls", "1", "--warmup", "1", "--connects", "1"],
    *["--connect-modes", "auto", "--discover-modes", "legacy"],
]

STDERR_SINK = open(os.devnull, "w")  # noqa: SIM115 - a real file, like ipybox's stderr log
EVERYTHING = Path(__file__).resolve().parent.parent / (
    "tests/node/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
)


def sdk_client(config: dict[str, Any], mode: str) -> Client:
    if "command" in config:
        params = StdioServerParameters(command=config["command"], args=config["args"], env=config.get("env"))
        return Client(stdio_client(params, errlog=STDERR_SINK), mode=mode)  # type: ignore[arg-type]
    if config["url"].endswith("/sse"):
        return Client(sse_client(config["url"]), mode=mode)  # type: ignore[arg-type]
    return Client(config["url"], mode=mode)  # type: ignore[arg-type]


async def time_it(action: Callable[[], Awaitable[object]]) -> float:
    started = time.perf_counter()
    await action()
    return time.perf_counter() - started


async def connect_sdk(config: dict[str, Any], mode: str) -> None:
    async with sdk_client(config, mode) as client:
        await client.list_tools()


async def connect_ipybox(config: dict[str, Any], mode: str) -> None:
    async with McpRegistry() as registry:
        await registry.add("bench", {**config, "protocol": mode})


def summary(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered), ordered[int(len(ordered) * 0.9) - 1]


async def call_latency(
    config: dict[str, Any], tools: list[tuple[str, dict[str, Any]]], calls: int, warmup: int
) -> list[tuple[tuple[float, float], tuple[float, float]]]:
    """(SDK, ipybox) median and p90 of each tool's calls, both clients on one connection each."""
    results = []
    async with sdk_client(config, "legacy") as client, McpRegistry() as registry:
        await registry.add("bench", config)
        for tool, arguments in tools:
            sdk_samples: list[float] = []
            ipybox_samples: list[float] = []
            for index in range(calls + warmup):  # interleaved, so both see the same machine load
                sdk = await time_it(lambda t=tool, a=arguments: client.call_tool(t, a))
                ours = await time_it(lambda t=tool, a=arguments: registry.call("bench", t, a))
                if index >= warmup:
                    sdk_samples.append(sdk)
                    ipybox_samples.append(ours)
            results.append((summary(sdk_samples), summary(ipybox_samples)))
    return results


def start_http_server() -> tuple[subprocess.Popen[str], int]:
    process = subprocess.Popen([PYTHON, str(SERVE_SCRIPT), "http"], stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    return process, int(process.stdout.readline().split()[1])


async def main(
    calls: int, connects: int, connect_modes: list[str], discover_modes: list[str], warmup: int
) -> None:
    process, port = start_http_server()
    try:
        configs = {
            "stdio": {
                "command": PYTHON,
                "args": [str(SERVE_SCRIPT), "stdio"],
                "env": {"PYTHONUNBUFFERED": "1"},
            },
            "http": {"url": f"http://127.0.0.1:{port}/mcp"},
            "sse": {"url": f"http://127.0.0.1:{port}/sse"},
        }
        if EVERYTHING.exists():
            configs["node stdio"] = {"command": "node", "args": [str(EVERYTHING), "stdio"]}
        print(f"connect (spawn + handshake + tools/list), median of {connects}, ms")
        print(f"{'transport':<11} {'mode':<7} {'mcp SDK':>9} {'ipybox':>9} {'ratio':>7}")
        for name, config in configs.items():
            for mode in connect_modes:
                sdk = [await time_it(lambda c=config, m=mode: connect_sdk(c, m)) for _ in range(connects)]
                ours = [await time_it(lambda c=config, m=mode: connect_ipybox(c, m)) for _ in range(connects)]
                sdk_ms, ours_ms = statistics.median(sdk) * 1000, statistics.median(ours) * 1000
                print(f"{name:<11} {mode:<7} {sdk_ms:9.1f} {ours_ms:9.1f} {ours_ms / sdk_ms:7.2f}")

        print(f"\none call on an open connection, {calls} sequential calls after {warmup}, ms (median / p90)")
        print(f"{'transport':<11} {'tool':<6} {'mcp SDK':>15} {'ipybox':>15} {'ratio':>7}")
        for name, config in configs.items():
            tools: list[tuple[str, dict[str, Any]]] = (
                [("echo", {"message": "hi"}), ("add", {"a": 1, "b": 2})]
                if "node" not in name
                else [("echo", {"message": "hi"}), ("get-sum", {"a": 1, "b": 2})]
            )
            latencies = await call_latency(config, tools, calls, warmup)
            for (tool, _), ((sdk_med, sdk_p90), (our_med, our_p90)) in zip(tools, latencies, strict=True):
                print(
                    f"{name:<11} {tool:<6} {sdk_med * 1000:7.2f} / {sdk_p90 * 1000:5.2f} "
                    f"{our_med * 1000:7.2f} / {our_p90 * 1000:5.2f} {our_med / sdk_med:7.2f}"
                )

        print("\nserver that never answers unknown methods (server/discover), one connect, ms")
        drop = {"command": PYTHON, "args": [str(RAW_SERVER_SCRIPT), "--clean", "--drop-unknown"]}
        for mode in discover_modes:
            print(f"  {mode:<7} {await time_it(lambda m=mode: connect_ipybox(drop, m)) * 1000:9.1f}")
    finally:
        process.terminate()
        process.wait()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--connects", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=20, help="calls before the measured ones")
    parser.add_argument("--connect-modes", default="legacy,auto", help="modes for the connect times")
    parser.add_argument("--discover-modes", default="legacy,auto", help="modes for the server/discover probe")
    arguments = parser.parse_args()
    connect_modes, discover_modes = arguments.connect_modes.split(","), arguments.discover_modes.split(",")
    asyncio.run(main(arguments.calls, arguments.connects, connect_modes, discover_modes, arguments.warmup))
