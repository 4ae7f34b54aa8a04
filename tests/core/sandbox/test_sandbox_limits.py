"""Resource limits hit inside the sandbox give clear errors; the kernel lives on or dies cleanly."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from sandbox_kit import require_bwrap, start_sandboxed

from ipybox_core.errors import KernelDied
from ipybox_core.sandbox import ResourceLimits, SandboxPolicy
from ipybox_core.sandbox._cgroups import available_controllers
from ipybox_core.sandbox._command import boot_source, rlimits
from prerequisites import require

pytestmark = pytest.mark.sandbox


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    require_bwrap()
    return tmp_path


async def test_cpu_budget_raises_in_the_cell_then_kills_the_kernel(workspace: Path) -> None:
    policy = SandboxPolicy(limits=ResourceLimits(cpu_seconds=2, cpu_grace_seconds=1))
    kernel = await start_sandboxed(policy, workspace)
    try:
        burn = "import time\nend = time.time() + 30\nwhile time.time() < end:\n    pass"
        output = await kernel.run(burn)
        assert output.error is not None and output.error.ename == "CpuTimeLimitExceeded", output
        assert "cpu_seconds" in output.error.evalue
        assert kernel.is_alive
        with pytest.raises(KernelDied):
            await kernel.run(burn)
    finally:
        await kernel.shutdown(now=True)


async def test_open_files_limit(workspace: Path) -> None:
    kernel = await start_sandboxed(SandboxPolicy(limits=ResourceLimits(open_files=200)), workspace)
    try:
        # Closed in the same cell: with no descriptor left the kernel's own messaging would stall too.
        output = await kernel.run(
            "files, error = [], None\n"
            "try:\n"
            "    for _ in range(500):\n"
            "        files.append(open('/dev/null'))\n"
            "except OSError as exc:\n"
            "    error = exc\n"
            "for f in files:\n"
            "    f.close()\n"
            "print(len(files), error)"
        )
        opened, message = output.text.split(" ", 1)
        assert 100 < int(opened) < 200 and "Too many open files" in message
        assert (await kernel.run("print('usable')")).text.strip() == "usable"
    finally:
        await kernel.shutdown(now=True)


async def test_memory_limit_is_a_memory_error_and_the_kernel_survives(workspace: Path) -> None:
    kernel = await start_sandboxed(SandboxPolicy(limits=ResourceLimits(memory_mb=512)), workspace)
    try:
        output = await kernel.run("import numpy\nbig = numpy.ones(2 * 1024**3 // 8)")
        assert output.error is not None and output.error.ename in ("MemoryError", "_ArrayMemoryError")
        output = await kernel.run("small = bytearray(100 * 1024**2)\nprint(len(small) // 2**20)")
        assert output.text.strip() == "100"
    finally:
        await kernel.shutdown(now=True)


async def test_total_memory_cgroup_stops_a_sandbox_whose_processes_together_exceed_it(
    workspace: Path,
) -> None:
    require(
        "memory" in available_controllers(), "no writable memory cgroup (cgroup v1 as root, or v2 delegated)"
    )
    policy = SandboxPolicy(limits=ResourceLimits(memory_mb=None, total_memory_mb=300))
    kernel = await start_sandboxed(policy, workspace)
    try:
        with pytest.raises(KernelDied):
            await kernel.run("chunks = [b'x' * 2**20 for _ in range(1000)]")
    finally:
        await kernel.shutdown(now=True)


def test_process_limit_for_a_non_root_user_counts_only_the_sandbox(workspace: Path) -> None:
    """As non-root, RLIMIT_NPROC bounds a fork bomb; inside the user namespace it counts the sandbox's
    processes only, not the user's other processes (30 here, more than the limit)."""
    # CI runs as root (it installs system packages): there this check must run, not skip.
    require(os.geteuid() == 0, "needs root to run the check as another user (uid 65534)")
    python = shutil.which("python3", path="/usr/bin:/bin")
    require(python is not None and shutil.which("setpriv") is not None, "needs /usr/bin/python3 and setpriv")
    assert python is not None
    nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"]
    config = json.dumps({"rlimits": rlimits(ResourceLimits(max_processes=20), process_limit=True)})
    spawn = (
        "import subprocess\nchildren = []\ntry:\n    for _ in range(60):\n"
        "        children.append(subprocess.Popen(['sleep', '5']))\nexcept OSError:\n    pass\n"
        "finally:\n    [child.kill() for child in children]\nprint(len(children))"
    )
    bwrap = ["bwrap", "--die-with-parent", "--unshare-user", "--unshare-pid", "--cap-drop", "ALL"]
    bwrap += ["--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--"]
    others = [subprocess.Popen([*nobody, "sleep", "30"]) for _ in range(30)]
    try:
        done = subprocess.run(
            [*nobody, *bwrap, python, "-c", boot_source(), config, "--exec", python, "-c", spawn],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
    finally:
        for process in others:
            process.kill()
            process.wait()
    assert 5 < int(done.stdout.strip()) < 20, done
