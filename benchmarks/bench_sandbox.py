"""Start time of a bubblewrap-sandboxed kernel against an unsandboxed one, measured in the same run.

Run: ``.venv/bin/python benchmarks/bench_sandbox.py [--rounds 9]``. Goal: sandboxed / unsandboxed
start-time ratio (medians) <= 1.2.

Each round starts one kernel of each kind, in alternating order (interleaved, so machine noise hits
both alike), and times ``Kernel.start`` plus the first execution (``1 + 1``); the sandboxed time
includes creating the launcher (``sandbox_launcher(policy, workspace=...)``, as the executor does per
kernel) with the default policy. One warm-up round (page cache, the per-process probe) is not
counted. The ratio of the minimums is printed too: on a busy machine it is the steadier figure.
Also printed: what the launcher's ``wrap`` costs (file-system plan, cgroups, options file).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from ipybox_core.kernel import Kernel, KernelConfig, LaunchSpec
from ipybox_core.sandbox import BwrapLauncher, SandboxPolicy, probe_sandbox, sandbox_launcher

#: Arguments for a seconds-long run that only checks the benchmark still works (tests/test_benchmarks.py).
TINY_ARGS = ["--rounds", "1"]


async def start_and_run(workspace: Path, *, sandboxed: bool) -> float:
    started = time.perf_counter()
    launcher = sandbox_launcher(SandboxPolicy(), workspace=workspace) if sandboxed else None
    kernel = await Kernel.start(KernelConfig(cwd=workspace, launcher=launcher))
    try:
        output = await kernel.run("1 + 1")
        elapsed = time.perf_counter() - started
        assert output.result is not None, output
        assert "2" in output.result.data.get("text/plain", ""), output
    finally:
        await kernel.shutdown(now=True)
    return elapsed


def wrap_cost(workspace: Path, repeats: int = 20) -> float:
    """Median seconds of ``BwrapLauncher.wrap`` for a typical kernel launch spec."""
    launcher = BwrapLauncher(SandboxPolicy(), workspace=workspace)
    runtime_dir = Path(tempfile.mkdtemp(prefix="ipybox-bench-"))
    spec = LaunchSpec(
        argv=["python3", "-m", "ipykernel_launcher", "-f", str(runtime_dir / "kernel.json")],
        env={"PATH": "/usr/bin:/bin"},
        cwd=workspace,
        runtime_dir=runtime_dir,
        ipc_dir=runtime_dir / "kernel.1",
    )
    spec.ipc_dir.mkdir()  # type: ignore[union-attr]
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        wrapped = launcher.wrap(spec)
        times.append(time.perf_counter() - started)
        for fd in wrapped.pass_fds:  # the options and seccomp memfds
            os.close(fd)
    launcher.close()
    shutil.rmtree(runtime_dir)
    return statistics.median(times)


async def main(rounds: int) -> None:
    probe_sandbox()
    workspace = Path(tempfile.mkdtemp(prefix="ipybox-bench-ws-"))
    try:
        await measure(workspace, rounds)
    finally:
        shutil.rmtree(workspace, ignore_errors=True)


async def measure(workspace: Path, rounds: int) -> None:
    await start_and_run(workspace, sandboxed=False)
    await start_and_run(workspace, sandboxed=True)
    plain: list[float] = []
    boxed: list[float] = []
    for index in range(rounds):
        order = (False, True) if index % 2 == 0 else (True, False)
        for sandboxed in order:
            (boxed if sandboxed else plain).append(await start_and_run(workspace, sandboxed=sandboxed))
    ratio = statistics.median(boxed) / statistics.median(plain)
    fastest = min(boxed) / min(plain)
    print(f"kernel start + first execution, {rounds} interleaved rounds (after 1 warm-up round)")
    for name, times in (("unsandboxed", plain), ("bubblewrap", boxed)):
        print(
            f"  {name:12} median {statistics.median(times):.3f} s   min {min(times):.3f}   "
            f"max {max(times):.3f}   all {[round(t, 3) for t in times]}"
        )
    verdict = "met" if ratio <= 1.2 else "MISSED"
    print(f"  ratio sandboxed/unsandboxed: medians {ratio:.2f} (goal <= 1.20: {verdict})")
    print(f"  ratio of the minimums: {fastest:.2f}")
    wrap = wrap_cost(workspace) * 1000
    print(f"  BwrapLauncher.wrap (plan, cgroups, options and seccomp memfds): median {wrap:.1f} ms")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9)
    asyncio.run(main(parser.parse_args().rounds))
