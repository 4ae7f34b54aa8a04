"""A dying kernel is noticed within about a second, reported, and replaced on the next execution."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import pytest_asyncio
from _kernel_helpers import is_running, pids_running

from ipybox_core.errors import ExecutorClosed, KernelDied, KernelStartError
from ipybox_core.kernel import Kernel, KernelConfig, LaunchSpec

pytestmark = pytest.mark.asyncio(loop_scope="module")

RUN_TIMEOUT = 120.0
"""The run's own timeout: jupyter_client alone would wait for it; we only check "not that"."""
NOTICED_WITHIN = RUN_TIMEOUT / 2
"""A bound, not a speed: the death ended the wait, long before the timeout would have (a loaded
machine can take seconds to notice, never a minute)."""


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def kernel() -> AsyncIterator[Kernel]:
    async with Kernel() as kernel:
        yield kernel


@pytest.mark.parametrize(
    ("code", "exit_code", "described"),
    [
        ("import os\nos._exit(3)", 3, "exit code 3"),
        ("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)", -signal.SIGKILL, "SIGKILL"),
        ("import ctypes\nctypes.string_at(0)", -signal.SIGSEGV, "SIGSEGV"),
    ],
)
async def test_death_during_execution_is_reported_and_the_next_run_gets_a_fresh_kernel(
    kernel: Kernel, code: str, exit_code: int, described: str
) -> None:
    await kernel.run("doomed_state = 1")
    generation = kernel.generation
    started = time.monotonic()
    with pytest.raises(KernelDied) as raised:
        await kernel.run(code, timeout=RUN_TIMEOUT)
    assert time.monotonic() - started < NOTICED_WITHIN
    assert raised.value.exit_code == exit_code
    assert described in str(raised.value)
    assert "state is lost" in str(raised.value)
    assert not kernel.is_alive

    output = await kernel.run("'revived'")
    assert output.text == "'revived'\n"
    assert kernel.generation == generation + 1
    lost = await kernel.run("doomed_state")
    assert lost.error is not None and lost.error.ename == "NameError"


async def test_segfault_report_includes_the_kernel_log(kernel: Kernel) -> None:
    with pytest.raises(KernelDied) as raised:
        await kernel.run("import ctypes\nctypes.string_at(0)")
    assert "kernel log" in str(raised.value)
    assert "Segmentation fault" in str(raised.value)


async def test_death_while_idle_is_noticed_and_survived(kernel: Kernel) -> None:
    await kernel.run("1")
    pid = kernel.pid
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + NOTICED_WITHIN
    while kernel.is_alive and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not kernel.is_alive
    assert (await kernel.run("'back'")).text == "'back'\n"
    assert kernel.pid != pid


@dataclass(frozen=True)
class ShellWrapper:
    """A launcher that runs a shell snippet in front of (or instead of) the kernel command."""

    script: str
    interrupt_mode: str = "signal"

    def wrap(self, spec: LaunchSpec) -> LaunchSpec:
        argv = ["/bin/sh", "-c", self.script, "wrapper", *spec.argv]
        return LaunchSpec(argv=argv, env=spec.env, cwd=spec.cwd, runtime_dir=spec.runtime_dir)


async def test_kernel_exiting_at_start_is_a_start_error_with_its_log(tmp_path: Path) -> None:
    config = KernelConfig(launcher=ShellWrapper("echo 'sandbox setup failed' >&2; exit 3"))  # type: ignore[arg-type]
    with pytest.raises(KernelStartError) as raised:
        await Kernel.start(config)
    assert "exit code 3" in str(raised.value)
    assert "sandbox setup failed" in str(raised.value)


async def test_start_timeout_kills_what_was_started() -> None:
    marker = "60.4242"  # an unusual argument to find the process by
    launcher = ShellWrapper(f"sleep {marker} & sleep {marker}")
    kernel = Kernel(KernelConfig(launcher=launcher, startup_timeout=1))  # type: ignore[arg-type]
    with pytest.raises(KernelStartError, match="did not become ready within 1 s"):
        await kernel.__aenter__()
    assert pids_running(f"sleep {marker}") == set()
    with pytest.raises(ExecutorClosed):
        await kernel.run("1")


async def test_missing_interpreter_is_a_start_error() -> None:
    with pytest.raises(KernelStartError, match="cannot launch the kernel"):
        await Kernel.start(KernelConfig(python="/nonexistent/python3"))


async def test_is_running_helper_sees_this_process() -> None:
    assert is_running(os.getpid())
