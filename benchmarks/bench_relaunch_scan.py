"""How long a sandboxed relaunch over a big workspace stalls the event loop every session shares.

Run: ``.venv/bin/python benchmarks/bench_relaunch_scan.py [--entries 100000] [--rounds 3]``. Goal: a
relaunch whose workspace holds 100,000 entries stalls another session's event-loop heartbeat by at
most 50 ms.

Each round restarts (``Kernel.restart``) a bubblewrap-sandboxed kernel whose workspace holds
``--entries`` planted files, and one whose workspace is empty (the baseline), in alternating order,
while a heartbeat task (what any other session's work on the loop would be) sleeps 1 ms at a time
and records how late it wakes. The relaunch scans the workspace for hidden paths in a worker thread;
for reference one relaunch of the big workspace also runs with ``wrap`` on the event loop, as
before, to show what that stall was.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from ipybox_core.kernel import Kernel, KernelConfig, LaunchSpec
from ipybox_core.kernel import kernel as kernel_module
from ipybox_core.kernel.launcher import KernelLauncher
from ipybox_core.sandbox import BwrapLauncher, ResourceLimits, SandboxPolicy, probe_sandbox

#: Arguments for a seconds-long run that only checks the benchmark still works (tests/test_benchmarks.py).
TINY_ARGS = ["--entries", "2000", "--rounds", "1"]

GOAL_MS = 50.0
TICK = 0.001
POLICY = SandboxPolicy(limits=ResourceLimits(max_processes=256))


def plant(workspace: Path, entries: int, per_directory: int = 1000) -> None:
    """``entries`` entries: empty files in directories of ``per_directory`` (the directories count)."""
    made = 0
    directory = 0
    while made < entries:
        folder = workspace / f"planted-{directory}"
        folder.mkdir()
        made += 1
        for index in range(min(per_directory, entries - made)):
            (folder / str(index)).touch()
            made += 1
        directory += 1


async def max_stall_during(action: Callable[[], Awaitable[None]]) -> tuple[float, float]:
    """Run ``action`` beside a heartbeat; return (the heartbeat's worst lateness, the action's seconds)."""
    worst = 0.0
    running = True

    async def heartbeat() -> None:
        nonlocal worst
        while running:
            before = time.perf_counter()
            await asyncio.sleep(TICK)
            worst = max(worst, time.perf_counter() - before - TICK)

    beating = asyncio.create_task(heartbeat())
    await asyncio.sleep(0.05)  # the heartbeat runs before the action starts
    started = time.perf_counter()
    try:
        await action()
    finally:
        elapsed = time.perf_counter() - started
        running = False
        await beating
    return worst, elapsed


async def on_the_loop(launcher: KernelLauncher, spec: LaunchSpec) -> LaunchSpec:
    return launcher.wrap(spec)


async def measure(big: Path, empty: Path, rounds: int) -> None:
    kernels = {}
    for name, workspace in (("big", big), ("empty", empty)):
        launcher = BwrapLauncher(POLICY, workspace=workspace)
        kernels[name] = await Kernel.start(KernelConfig(cwd=workspace, launcher=launcher))
    try:
        stalls: dict[str, list[float]] = {"big": [], "empty": []}
        times: dict[str, list[float]] = {"big": [], "empty": []}
        for index in range(rounds):
            for name in ("big", "empty") if index % 2 == 0 else ("empty", "big"):
                stall, elapsed = await max_stall_during(kernels[name].restart)
                stalls[name].append(stall)
                times[name].append(elapsed)
        real_wrap = kernel_module.wrap_off_loop
        kernel_module.wrap_off_loop = on_the_loop  # type: ignore[assignment]
        try:
            before_stall, before_time = await max_stall_during(kernels["big"].restart)
        finally:
            kernel_module.wrap_off_loop = real_wrap
        for name in kernels:
            assert (await kernels[name].run("print('ok')")).text == "ok\n"
    finally:
        for kernel in kernels.values():
            await kernel.shutdown(now=True)
    entries = sum(1 for _ in big.rglob("*"))
    heartbeat = f"heartbeat every {TICK * 1000:g} ms"
    print(f"sandboxed relaunch (Kernel.restart), {rounds} interleaved rounds; {heartbeat}")
    for name, label in (("empty", "empty workspace (baseline)"), ("big", f"{entries} entries")):
        median, worst = statistics.median(stalls[name]) * 1000, max(stalls[name]) * 1000
        print(
            f"  {label:28} max heartbeat stall: median {median:6.1f} ms, worst {worst:6.1f} ms   "
            f"relaunch median {statistics.median(times[name]):.2f} s"
        )
    worst = max(stalls["big"]) * 1000
    verdict = "met" if worst <= GOAL_MS else "MISSED"
    print(f"  worst stall with {entries} entries: {worst:.1f} ms (goal <= {GOAL_MS:g} ms: {verdict})")
    print(
        f"  for reference, wrap on the event loop (as before): stall {before_stall * 1000:.1f} ms, "
        f"relaunch {before_time:.2f} s"
    )


async def main(entries: int, rounds: int) -> None:
    probe_sandbox()
    base = Path(tempfile.mkdtemp(prefix="ipybox-bench-relaunch-"))
    try:
        big, empty = base / "big", base / "empty"
        big.mkdir()
        empty.mkdir()
        plant(big, entries)
        await measure(big, empty, rounds)
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    arguments = parser.parse_args()
    asyncio.run(main(arguments.entries, arguments.rounds))
