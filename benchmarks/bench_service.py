"""The ipybox service (``ipybox serve``) against the in-process executor, in one run.

Run: ``.venv/bin/python benchmarks/bench_service.py [--rounds 30] [--calls 50]``. The service is a
real ``ipybox serve`` process on loopback (bearer token, Streamable HTTP) reached through
``RemoteSessions``; the baseline is a ``CodeExecutor`` in this process. Both register the same stdio
test MCP server. Three parts:

- **output**: ``execute_code`` of a cell that only prints: p50 in-process, p50 through the service,
  ratio. Goal: <= 1.2.
- **approval**: a cell making one MCP call that waits for approval; the time from ``accept()`` until
  the result is back (the answer travels to the code, the MCP call runs, the result returns): p50
  of each and the difference. Goal: <= +5 ms.
- **tool call**: ``--calls`` MCP calls timed inside the kernel, auto-approved (the service with
  ``--yes``, the executor with ``approval="never"``): a call never passes through the application,
  so the per-call p50 should be unchanged (ratio ~1).
- **agent tool**: the same calls of a host tool (``from agent_tools import add``), auto-approved: in
  process it runs in the executor's process; through the service each call comes back to this
  process as a round of its own. Reported against the MCP call through the service.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent.parent / "tests"))
sys.path.insert(0, str(Path(__file__).parent.parent / "tests" / "service"))

from service_kit import TEST_SERVER, start_service

from ipybox_core import ApprovalRequest, CodeExecutor, ExecutionResult
from ipybox_core.hosttools import HostCall, HostTool
from ipybox_core.remote import RemoteSessions

#: Arguments for a seconds-long run that only checks the benchmark still works (tests/test_benchmarks.py).
TINY_ARGS = ["--rounds", "1", "--calls", "1"]

SERVER = TEST_SERVER  # what the service registers from its config too
APPROVED_CALL = "from mcptools.test import add\nprint(add(a=1, b=2))"
TIMED_CALLS = """
import time
from mcptools.test import add
_times = []
for _i in range({calls}):
    _t = time.perf_counter()
    add(a=_i, b=1)
    _times.append(time.perf_counter() - _t)
print(sorted(_times)[len(_times) // 2])
"""


TIMED_HOST_CALLS = TIMED_CALLS.replace("from mcptools.test import add", "from agent_tools import add")


async def add(call: HostCall) -> int:
    return int(call.arguments["a"]) + int(call.arguments["b"])


HOST_ADD = HostTool(
    "add",
    add,
    "Add two numbers.",
    {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}},
)


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f} ms"


@asynccontextmanager
async def service(tmp: Path, *args: str) -> AsyncIterator[RemoteSessions]:
    """A real ``ipybox serve`` process (the test suite's launcher) and a client connected to it."""
    running = start_service(tmp / f"ws{len(args)}", *args)
    try:
        async with RemoteSessions(running.url, token=running.token, client_name="bench") as sessions:
            yield sessions
    finally:
        running.stop()


async def run_to_end(execution: Any) -> ExecutionResult:
    result = await execution.wait()
    assert result.error is None, result.error
    return result


async def approval_round_trip(executor: Any, rounds: int) -> list[float]:
    """Seconds from ``accept()`` to the result, per round."""
    times = []
    for _ in range(rounds):
        execution = executor.stream(APPROVED_CALL)
        stop = await execution.next_stop()
        assert isinstance(stop, ApprovalRequest), stop
        started = time.perf_counter()
        await stop.accept()
        result = await execution.next_stop()
        times.append(time.perf_counter() - started)
        assert isinstance(result, ExecutionResult), result
        assert result.text.strip() == "3", result
    return times


async def output_only(executor: Any, rounds: int) -> list[float]:
    times = []
    for index in range(rounds):
        started = time.perf_counter()
        result = await run_to_end(executor.stream(f"print({index})"))
        times.append(time.perf_counter() - started)
        assert result.text.strip() == str(index)
    return times


async def tool_call_p50(executor: Any, calls: int, cell: str = TIMED_CALLS) -> float:
    result = await run_to_end(executor.stream(cell.format(calls=calls)))
    return float(result.text.strip().splitlines()[-1])


async def main(rounds: int, calls: int) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-service-") as name:
        tmp = Path(name)
        async with CodeExecutor(workspace=tmp / "local", approval="always") as local:
            await local.register_mcp_server("test", SERVER)
            async with service(tmp) as sessions:
                remote = (await sessions.session("bench")).executor
                for executor in (local, remote):  # warm both up
                    await output_only(executor, 2)
                    await approval_round_trip(executor, 1)
                local_out, remote_out = await output_only(local, rounds), await output_only(remote, rounds)
                local_ok, remote_ok = (
                    await approval_round_trip(local, rounds),
                    await approval_round_trip(remote, rounds),
                )
        lo, ro = statistics.median(local_out), statistics.median(remote_out)
        print(f"output ({rounds} rounds): in-process p50 {ms(lo)}, service p50 {ms(ro)}; ratio {ro / lo:.2f}")
        la, ra = statistics.median(local_ok), statistics.median(remote_ok)
        print(
            f"approval ({rounds} rounds, accept -> result): in-process p50 {ms(la)}, service p50 {ms(ra)}; "
            f"difference {(ra - la) * 1000:+.2f} ms"
        )
        async with CodeExecutor(workspace=tmp / "local2", approval="never", host_tools=[HOST_ADD]) as local:
            await local.register_mcp_server("test", SERVER)
            async with service(tmp, "--yes") as sessions:
                await sessions.register_host_tools([HOST_ADD])
                remote = (await sessions.session("calls")).executor
                for executor in (local, remote):
                    await tool_call_p50(executor, 3)
                    await tool_call_p50(executor, 3, TIMED_HOST_CALLS)
                lt, rt = await tool_call_p50(local, calls), await tool_call_p50(remote, calls)
                lh = await tool_call_p50(local, calls, TIMED_HOST_CALLS)
                rh = await tool_call_p50(remote, calls, TIMED_HOST_CALLS)
        print(
            f"tool call ({calls} calls, in the kernel): in-process p50 {ms(lt)}, "
            f"service p50 {ms(rt)}; ratio {rt / lt:.2f}"
        )
        print(
            f"agent tool ({calls} calls, in the kernel): in-process p50 {ms(lh)}, service p50 {ms(rh)}; "
            f"{rh / rt:.2f}x the MCP call through the service ({(rh - rt) * 1000:+.2f} ms)"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--calls", type=int, default=50)
    arguments = parser.parse_args()
    asyncio.run(main(arguments.rounds, arguments.calls))
