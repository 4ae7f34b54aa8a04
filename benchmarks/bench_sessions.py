"""Sessions (one kernel per conversation): warm acquire, many idle sessions, concurrent conversations.

Run: ``.venv/bin/python benchmarks/bench_sessions.py [--rounds 9] [--idle 100] [--conversations 20]
[--executions 10] [--calls 200] [--warm 2]``. Every figure is measured in this run. Three parts:

- **acquire**: ``await sessions.session(key)`` for a new key with a warm executor ready (the pool
  is refilled between rounds), against a cold ``CodeExecutor.start()`` of the same template, both
  without MCP servers so that only the kernel side is compared; unsandboxed and sandboxed (when
  bubblewrap works here). p50 of each and the ratio warm / cold. Goal: sandboxed p50 <= 50 ms and
  <= 0.2x cold.
- **idle**: ``--idle`` live sessions, each having run one cell (``x = 1``); RSS and PSS of every
  idle kernel process (``psutil.memory_full_info``), per kernel and in total, and the application's
  own RSS. Tool-call latency (measured in the kernel around each ``add`` call: runtime, tool server,
  approval gate, shared MCP connection, server and back) of one active session: p50/p99 with only
  that session live, then with all the idle ones live. Goal: p99 ratio <= 2.
- **conversations**: ``--conversations`` concurrent conversations, each running ``--executions``
  executions with one tool call each, every call decided (accepted) by that conversation's own
  driver. The benchmark checks itself that nothing crosses: every approval request carries its own
  conversation's arguments, every output and variable is its own, every workspace holds only its
  own files. It exits non-zero on any leak.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).parent.parent / "tests"))

from ipybox_core import (
    ApprovalRequest,
    CodeExecutor,
    ExecutionResult,
    OutputChunk,
    SandboxUnavailable,
    Sessions,
)
from ipybox_core.sandbox import probe_sandbox
from servers import PYTHON, SERVE_SCRIPT

#: Arguments for a seconds-long run that only checks the benchmark still works (tests/test_benchmarks.py).
TINY_ARGS = [
    *["--rounds", "1", "--idle", "1", "--conversations", "2"],
    *["--executions", "2", "--calls", "2", "--warm", "1"],
]

STDIO_SERVER = {"command": PYTHON, "args": [str(SERVE_SCRIPT), "stdio"], "env": {"PYTHONUNBUFFERED": "1"}}


def p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


def sandbox_works() -> bool:
    try:
        probe_sandbox()
    except SandboxUnavailable as exc:
        print(f"  (sandboxed half skipped: {exc})")
        return False
    return True


# --- acquire ------------------------------------------------------------------------------------


async def acquire_round(rounds: int, sandbox: bool) -> tuple[list[float], list[float]]:
    warm: list[float] = []
    cold: list[float] = []
    with tempfile.TemporaryDirectory(prefix="bench-sessions-") as tmp:
        root = Path(tmp) / "sessions"
        async with Sessions(root=root, warm=1, sandbox=sandbox, approval="never") as sessions:
            for index in range(rounds):
                while not sessions._ready:  # the pool refilled (in the background) before timing
                    await asyncio.sleep(0.02)
                started = time.perf_counter()
                session = await sessions.session(f"conversation-{index}")
                warm.append(time.perf_counter() - started)
                done = await session.executor.execute("1 + 1")
                assert done.error is None, done.error
                await sessions.close_session(session.key)

                started = time.perf_counter()
                workspace = Path(tmp) / f"cold-{index}"
                executor = CodeExecutor(workspace=workspace, sandbox=sandbox, approval="never")
                await executor.start()
                cold.append(time.perf_counter() - started)
                done = await executor.execute("1 + 1")
                assert done.error is None, done.error
                await executor.close()
    return warm, cold


async def bench_acquire(rounds: int) -> None:
    print(f"acquire: {rounds} rounds, warm=1, no MCP servers (kernel side only)")
    modes = [False, *([True] if sandbox_works() else [])]
    for sandbox in modes:
        warm, cold = await acquire_round(rounds, sandbox)
        label = "sandboxed  " if sandbox else "unsandboxed"
        w50, c50 = statistics.median(warm), statistics.median(cold)
        print(
            f"  {label}: warm acquire p50 {ms(w50)} (max {ms(max(warm))}), cold CodeExecutor start "
            f"p50 {ms(c50)}; ratio {w50 / c50:.3f}"
        )


# --- many idle sessions -------------------------------------------------------------------------

CALLS_CODE = """
import time
from mcptools.test import add
__lat = []
for __i in range({calls}):
    __t = time.perf_counter()
    add(a=__i, b=1)
    __lat.append(time.perf_counter() - __t)
print(','.join(f'{{v:.6f}}' for v in __lat))
"""


async def call_latencies(sessions: Sessions, key: str, calls: int) -> list[float]:
    session = await sessions.session(key)
    await session.executor.execute(CALLS_CODE.format(calls=5))  # warm-up: imports, connection
    done = await session.executor.execute(CALLS_CODE.format(calls=calls))
    assert done.error is None, done.error
    return [float(v) for v in done.text.strip().split(",")]


def kernel_processes() -> list[psutil.Process]:
    found = []
    for child in psutil.Process().children(recursive=True):
        try:
            if "ipykernel_launcher" in child.cmdline():
                found.append(child)
        except psutil.Error:
            pass
    return found


async def bench_idle(count: int, calls: int, warm: int) -> None:
    print(f"idle: {count} live idle sessions (unsandboxed, one shared MCP server, approval='never')")
    with tempfile.TemporaryDirectory(prefix="bench-sessions-") as tmp:
        async with Sessions(
            root=Path(tmp),
            warm=warm,
            max_sessions=count + 1,
            idle_timeout=None,
            approval="never",
            mcp_servers={"test": STDIO_SERVER},
        ) as sessions:
            alone = await call_latencies(sessions, "active", calls)
            app_before = psutil.Process().memory_info().rss
            started = time.perf_counter()
            for index in range(count):
                session = await sessions.session(f"idle-{index}")
                done = await session.executor.execute("x = 1")
                assert done.error is None, done.error
            made = time.perf_counter() - started
            app_after = psutil.Process().memory_info().rss
            crowded = await call_latencies(sessions, "active", calls)
            rss, pss = [], []
            for process in kernel_processes():
                try:
                    info = process.memory_full_info()
                except psutil.Error:
                    continue
                rss.append(info.rss)
                pss.append(getattr(info, "pss", info.rss))
            mib = 2**20
            print(f"  made {count} sessions in {made:.1f} s ({sessions.live} live)")
            print(
                f"  kernels (live + warm): {len(rss)}; per kernel RSS {statistics.mean(rss) / mib:.1f} MiB, "
                f"PSS {statistics.mean(pss) / mib:.1f} MiB; total RSS {sum(rss) / mib:.0f} MiB, "
                f"PSS {sum(pss) / mib:.0f} MiB"
            )
            print(f"  application RSS growth: {(app_after - app_before) / mib / count:.2f} MiB per session")
            a99, c99 = p(alone, 0.99), p(crowded, 0.99)
            print(
                f"  tool call ({calls} calls): alone p50 {ms(p(alone, 0.5))} p99 {ms(a99)}; "
                f"with {count} idle p50 {ms(p(crowded, 0.5))} p99 {ms(c99)}; p99 ratio {c99 / a99:.2f}"
            )


# --- concurrent conversations -------------------------------------------------------------------

TURN_CODE = """
import os
if {turn} == 0:
    me = {key!r}
    seen = []
print('me', me)
open(f'{{me}}-{turn}.txt', 'w').write(me)
print('files', sorted(os.listdir('.')))
from mcptools.test import add
seen.append(add(a={index}, b={turn}))
print('seen', seen)
"""


async def conversation(sessions: Sessions, index: int, executions: int, leaks: list[str]) -> int:
    key = f"conv-{index}"
    session = await sessions.session(key)
    approvals = 0
    for turn in range(executions):
        text = ""
        result: ExecutionResult | None = None
        async with session.executor.stream(TURN_CODE.format(turn=turn, key=key, index=index)) as execution:
            async for event in execution:
                if isinstance(event, ApprovalRequest):
                    if event.args != {"a": index, "b": turn}:
                        leaks.append(f"{key} turn {turn}: approval request of another call {event.args}")
                        await event.reject("not ours")
                    else:
                        approvals += 1
                        await event.accept()
                elif isinstance(event, OutputChunk):
                    text += event.text
                elif isinstance(event, ExecutionResult):
                    result = event
        if result is None or result.error is not None:
            leaks.append(f"{key} turn {turn}: failed: {result.error if result else 'no result'}")
            continue
        expected_files = [f"{key}-{t}.txt" for t in range(turn + 1)]
        expected = f"me {key}\nfiles {sorted(expected_files)}\nseen {[index + t for t in range(turn + 1)]}\n"
        for what, got in (("streamed output", text), ("result", result.text)):
            if got != expected:
                leaks.append(f"{key} turn {turn}: {what} {got!r} != {expected!r}")
    on_disk = sorted(path.name for path in session.workspace.iterdir())
    if on_disk != sorted(f"{key}-{t}.txt" for t in range(executions)):
        leaks.append(f"{key}: workspace holds {on_disk}")
    return approvals


async def bench_conversations(count: int, executions: int, warm: int) -> bool:
    print(f"conversations: {count} concurrent, {executions} executions and {executions} approved calls each")
    with tempfile.TemporaryDirectory(prefix="bench-sessions-") as tmp:
        async with Sessions(
            root=Path(tmp),
            warm=warm,
            max_sessions=count,
            approval="always",
            mcp_servers={"test": STDIO_SERVER},
        ) as sessions:
            leaks: list[str] = []
            started = time.perf_counter()
            approvals = await asyncio.gather(
                *(conversation(sessions, index, executions, leaks) for index in range(count))
            )
            wall = time.perf_counter() - started
    total = sum(approvals)
    print(
        f"  {count * executions} executions, {total} approved calls in {wall:.1f} s; "
        f"cross-session leaks: {len(leaks)}"
    )
    for leak in leaks[:20]:
        print(f"  LEAK {leak}")
    return not leaks and total == count * executions


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--idle", type=int, default=100)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--conversations", type=int, default=20)
    parser.add_argument("--executions", type=int, default=10)
    parser.add_argument("--warm", type=int, default=2, help="warm pool of the idle and conversations parts")
    args = parser.parse_args()
    await bench_acquire(args.rounds)
    await bench_idle(args.idle, args.calls, args.warm)
    if not await bench_conversations(args.conversations, args.executions, args.warm):
        raise SystemExit("conversations leaked into each other (see LEAK lines)")


if __name__ == "__main__":
    asyncio.run(main())
