"""What OAuth costs an MCP server's registration and first call, against the same server without it.

    .venv/bin/python benchmarks/bench_oauth.py [--connects N] [--calls N]

``tests/servers/oauth_server.py`` serves one MCP server twice on loopback, with OAuth (its own
authorization server approving at once) and without. In the same run it measures, median of N:

- registration (``McpRegistry.add``: handshake + tools/list) of the open server; of the protected
  server with a full authorization (discovery, dynamic registration, the authorization event
  answered by following the URL, PKCE token exchange); and with the tokens a previous run stored;
- the first call after registration, and a call on an open connection (median of N calls).

Ratios are OAuth / open (1.00 = no overhead). The authorization is answered by code at once, so
the figures are ipybox's and the protocol's cost, not a user's time at a browser.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, NamedTuple

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import httpx2

from ipybox_core.mcp import McpRegistry
from ipybox_core.mcp.oauth import AuthorizationRequest
from ipybox_core.mcp.oauth_store import FileTokenStore, TokenStore
from servers import PYTHON, SERVERS_DIR

#: Arguments for a seconds-long run that only checks the benchmark still works (tests/test_benchmarks.py).
TINY_ARGS = ["--connects", "1", "--calls", "2"]


async def follow(request: AuthorizationRequest) -> str:
    """The authorization event answered like a browser: the authorization server redirects at once."""
    async with httpx2.AsyncClient() as http:
        return (await http.get(request.url)).headers["location"]


class Run(NamedTuple):
    """Seconds to register, to make the first call, and for each of the later calls."""

    register: float
    first: float
    later: list[float]


async def register_and_call(config: dict[str, Any], store: TokenStore | None, calls: int) -> Run:
    """Register the server, call a tool once, then ``calls`` times more."""
    async with McpRegistry(authorize=follow, token_store=store) as registry:
        started = time.perf_counter()
        await registry.add("bench", config)
        registered = time.perf_counter()
        await registry.call("bench", "add", {"a": 1, "b": 2})
        first = time.perf_counter()
        later = []
        for _ in range(calls):
            before = time.perf_counter()
            await registry.call("bench", "add", {"a": 1, "b": 2})
            later.append(time.perf_counter() - before)
    return Run(registered - started, first - registered, later)


def summarise(runs: list[Run]) -> tuple[float, float, float]:
    """Medians of the registrations, the first calls and all later calls."""
    later = [sample for run in runs for sample in run.later]
    return (
        statistics.median(run.register for run in runs),
        statistics.median(run.first for run in runs),
        statistics.median(later) if later else 0.0,
    )


def start_server() -> tuple[subprocess.Popen[str], int, int]:
    process = subprocess.Popen(
        [PYTHON, str(SERVERS_DIR / "oauth_server.py")],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert process.stdout is not None
    _, _, protected, unprotected = process.stdout.readline().split()
    return process, int(protected), int(unprotected)


async def main(connects: int, calls: int) -> None:
    process, protected, unprotected = start_server()
    try:
        with tempfile.TemporaryDirectory(prefix="ipybox-bench-oauth-") as state:
            open_config = {"url": f"http://127.0.0.1:{unprotected}/mcp"}
            oauth_config = {"url": f"http://127.0.0.1:{protected}/mcp", "auth": "oauth"}
            warm_store = FileTokenStore(Path(state) / "warm")
            await register_and_call(oauth_config, warm_store, 0)  # stores tokens for the "stored" rows
            await register_and_call(open_config, None, 0)  # warm-up
            cases: dict[str, list[Run]] = {"open": [], "authorize": [], "stored": []}
            for index in range(connects):  # interleaved, so all see the same machine load
                cases["open"].append(await register_and_call(open_config, None, calls))
                fresh = FileTokenStore(Path(state) / f"fresh-{index}")
                cases["authorize"].append(await register_and_call(oauth_config, fresh, calls))
                cases["stored"].append(await register_and_call(oauth_config, warm_store, calls))
        base = summarise(cases["open"])
        print(f"registration and first call, median of {connects}, ms (ratio to the open server)")
        print(f"{'server':<28} {'register':>16} {'first call':>16} {'later calls':>16}")
        labels = {
            "open": "open (no auth)",
            "authorize": "OAuth, full authorization",
            "stored": "OAuth, stored tokens",
        }
        for case, runs in cases.items():
            figures = summarise(runs)
            print(
                f"{labels[case]:<28}"
                + "".join(
                    f" {ms * 1000:8.2f} ({ms / of if of else 0:5.2f})"
                    for ms, of in zip(figures, base, strict=True)
                )
            )
    finally:
        process.terminate()
        process.wait()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--connects", type=int, default=10)
    parser.add_argument("--calls", type=int, default=50)
    arguments = parser.parse_args()
    asyncio.run(main(arguments.connects, arguments.calls))
