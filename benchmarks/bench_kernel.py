"""Kernel benchmark: ipybox against bare jupyter_client on the same kind of kernel (ipc transport).

Run: ``.venv/bin/python benchmarks/bench_kernel.py [--rounds 7] [--calls 200]``. Every figure is
measured in this run, variants interleaved so that machine noise hits both alike.

1. Round trip of ``1+1``: ``Kernel.run`` (events folded into an ``ExecutionOutput``) against
   ``AsyncKernelClient.execute`` plus a loop reading iopub until the kernel is idle.
   Goal: ratio <= 1.15.
2. Cold start until ready: ``Kernel.start`` against ``AsyncKernelManager.start_kernel`` +
   ``start_channels`` + ``wait_for_ready``. Goal: ratio <= 1.2.

A warm executor's acquire (kernel, tool server and sandbox ready) is measured by ``bench_sessions.py``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from jupyter_client import AsyncKernelManager

from ipybox_core.kernel import Kernel, KernelConfig

#: Arguments for a seconds-long run that only checks the benchmark still works (tests/test_benchmarks.py).
TINY_ARGS = ["--rounds", "1", "--calls", "2"]


class BareKernel:
    """The baseline: jupyter_client's own manager and client, ipc transport, no ipybox code."""

    def __init__(self, kernel_args: list[str] | None = None) -> None:
        self.kernel_args = kernel_args or []
        self.dir = Path(tempfile.mkdtemp(prefix="bare-", dir="/tmp"))
        self.manager = AsyncKernelManager(
            kernel_name="python3",
            transport="ipc",
            ip=str(self.dir / "k"),
            connection_file=str(self.dir / "kernel.json"),
        )
        self.client: Any = None

    async def start(self) -> None:
        with open(os.devnull, "w") as devnull:
            await self.manager.start_kernel(stdout=devnull, stderr=devnull, extra_arguments=self.kernel_args)
        self.client = self.manager.client()
        self.client.start_channels()
        await self.client.wait_for_ready(timeout=60)

    async def run(self, code: str) -> None:
        msg_id = self.client.execute(code)
        while True:
            message = await self.client.get_iopub_msg()
            if (
                message["parent_header"].get("msg_id") == msg_id
                and message["msg_type"] == "status"
                and message["content"]["execution_state"] == "idle"
            ):
                return

    async def stop(self) -> None:
        self.client.stop_channels()
        await self.manager.shutdown_kernel(now=True)
        for path in self.dir.iterdir():
            path.unlink()
        self.dir.rmdir()


# The options ipybox starts its kernels with (no sqlite history, no colours): a second baseline that
# isolates the cost of ipybox's client and kernel-side hooks from the kernel's own configuration.
IPYBOX_KERNEL_OPTIONS = ["--HistoryManager.enabled=False", "--InteractiveShell.colors=nocolor"]


async def round_trips(rounds: int, calls: int) -> tuple[list[float], list[float], list[float]]:
    ipybox = await Kernel.start(KernelConfig())
    bare = BareKernel()
    alike = BareKernel(IPYBOX_KERNEL_OPTIONS)
    await bare.start()
    await alike.start()
    try:
        for _ in range(20):  # warm up
            await ipybox.run("1+1")
            await bare.run("1+1")
            await alike.run("1+1")
        ours: list[float] = []
        theirs: list[float] = []
        theirs_alike: list[float] = []
        for _ in range(rounds):
            started = time.perf_counter()
            for _ in range(calls):
                output = await ipybox.run("1+1")
            ours.append((time.perf_counter() - started) / calls)
            assert output.text == "2\n", output
            for baseline, times in ((bare, theirs), (alike, theirs_alike)):
                started = time.perf_counter()
                for _ in range(calls):
                    await baseline.run("1+1")
                times.append((time.perf_counter() - started) / calls)
        return ours, theirs, theirs_alike
    finally:
        await ipybox.shutdown(now=True)
        await bare.stop()
        await alike.stop()


async def cold_starts(rounds: int) -> tuple[list[float], list[float]]:
    ours: list[float] = []
    theirs: list[float] = []
    for _ in range(rounds):
        started = time.perf_counter()
        kernel = await Kernel.start(KernelConfig())
        ours.append(time.perf_counter() - started)
        await kernel.shutdown(now=True)

        bare = BareKernel()
        started = time.perf_counter()
        await bare.start()
        theirs.append(time.perf_counter() - started)
        await bare.stop()
    return ours, theirs


def report(
    name: str, ours: list[float], theirs: list[float], goal: float, unit: float, unit_name: str
) -> None:
    ratio = statistics.median(ours) / statistics.median(theirs)
    verdict = "meets" if ratio <= goal else "MISSES"
    print(
        f"{name}: ipybox median {statistics.median(ours) * unit:.2f} {unit_name} "
        f"(min {min(ours) * unit:.2f}), jupyter_client median {statistics.median(theirs) * unit:.2f} "
        f"{unit_name} (min {min(theirs) * unit:.2f}) -> ratio {ratio:.3f} ({verdict} goal <= {goal})"
    )


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--calls", type=int, default=200)
    args = parser.parse_args()

    ours, theirs, theirs_alike = await round_trips(args.rounds, args.calls)
    report(f"round trip of 1+1 ({args.rounds} x {args.calls} calls)", ours, theirs, 1.15, 1000, "ms")
    report("  same, baseline kernel with ipybox's kernel options", ours, theirs_alike, 1.15, 1000, "ms")
    ours, theirs = await cold_starts(args.rounds)
    report(f"cold start until ready ({args.rounds} runs)", ours, theirs, 1.2, 1000, "ms")
    print("  (wait_for_ready ends with 0.2 s of waiting for silence on iopub; ipybox waits for its welcome)")


if __name__ == "__main__":
    asyncio.run(main())
