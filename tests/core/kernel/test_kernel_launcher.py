"""The sandbox hook: a launcher wraps the kernel command (here a real wrapper process, /bin/sh)."""

from __future__ import annotations

import shlex
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import pytest_asyncio
from _kernel_helpers import descendants, env_of, is_running

from ipybox_core.errors import ExecutionTimeout
from ipybox_core.kernel import Kernel, KernelConfig, KernelLauncher, LaunchSpec

pytestmark = pytest.mark.asyncio(loop_scope="module")


@dataclass
class EnvMovingWrapper:
    """Like bubblewrap: the wrapper gets an empty environment and sets the kernel's itself.

    ``/bin/sh`` stays alive as the kernel's parent (it does not ``exec``), so signals sent to the
    wrapper's process group would also hit the wrapper: interrupts go over the control channel.
    """

    interrupt_mode: str = "message"
    seen: list[LaunchSpec] = field(default_factory=list)

    def wrap(self, spec: LaunchSpec) -> LaunchSpec:
        self.seen.append(spec)
        exports = " ".join(f"{name}={shlex.quote(value)}" for name, value in spec.env.items())
        script = f'env -i {exports} "$@"; echo "wrapper saw exit $?"'
        return LaunchSpec(
            argv=["/bin/sh", "-c", script, "wrapper", *spec.argv],
            env={"PATH": "/usr/bin:/bin"},
            cwd=spec.cwd,
            runtime_dir=spec.runtime_dir,
        )


@pytest.fixture(scope="module")
def launcher() -> EnvMovingWrapper:
    return EnvMovingWrapper()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def kernel(
    launcher: EnvMovingWrapper, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Kernel]:
    workspace = tmp_path_factory.mktemp("ws")
    config = KernelConfig(cwd=workspace, launcher=launcher, env={"FROM_CALLER": "yes", "JPY_PARENT_PID": "1"})  # type: ignore[arg-type]
    async with Kernel(config) as kernel:
        yield kernel


async def test_the_wrapper_satisfies_the_protocol() -> None:
    assert isinstance(EnvMovingWrapper(), KernelLauncher)


async def test_launcher_gets_the_complete_launch_spec(kernel: Kernel, launcher: EnvMovingWrapper) -> None:
    spec = launcher.seen[0]
    assert list(spec.argv[1:3]) == ["-m", "ipykernel_launcher"]
    assert spec.runtime_dir == kernel.runtime_dir
    assert spec.cwd == kernel.config.cwd
    assert spec.env["FROM_CALLER"] == "yes"
    assert "JPY_PARENT_PID" not in spec.env, "it makes ipykernel kill itself inside a PID namespace"
    assert Path(spec.argv[spec.argv.index("-f") + 1]).parent == kernel.runtime_dir


async def test_kernel_runs_inside_the_wrapper_with_the_moved_environment(kernel: Kernel) -> None:
    output = await kernel.run("import os\nprint(os.environ['FROM_CALLER'], os.getppid())")
    text, parent = output.text.split()
    assert text == "yes"
    assert int(parent) == kernel.pid, "the wrapper is the kernel's parent"
    kernel_pids = [pid for pid in descendants(kernel.pid or 0) if "FROM_CALLER" in env_of(pid)]
    assert kernel_pids and all("JPY_PARENT_PID" not in env_of(pid) for pid in kernel_pids)


async def test_message_interrupt_reaches_the_kernel_through_the_wrapper(kernel: Kernel) -> None:
    assert kernel.interrupt_mode == "message"
    await kernel.run("kept = 'yes'")
    with pytest.raises(ExecutionTimeout):
        await kernel.run("while True: pass", timeout=0.5)
    assert (await kernel.run("kept")).text == "'yes'\n"
    assert kernel.is_alive


async def test_shutdown_ends_wrapper_and_kernel_cleanly(launcher: EnvMovingWrapper, tmp_path: Path) -> None:
    kernel = await Kernel.start(KernelConfig(cwd=tmp_path, launcher=launcher))  # type: ignore[arg-type]
    wrapper = kernel.pid
    assert wrapper is not None
    await kernel.run("handle = open('unclosed.txt', 'w')\nhandle.write('flushed at exit')")
    inner = descendants(wrapper)
    assert inner
    await kernel.shutdown()
    assert not any(is_running(pid) for pid in {wrapper, *inner})
    assert (tmp_path / "unclosed.txt").read_text() == "flushed at exit", "the kernel exited, not killed"
