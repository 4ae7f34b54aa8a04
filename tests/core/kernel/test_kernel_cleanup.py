"""Nothing is left behind: no kernel, no process it started, no socket, no runtime directory.

Checked after a normal shutdown, after a crash, when the owning task is cancelled mid-execution and
when a kernel object is dropped without shutdown. Processes are found through /proc.
"""

from __future__ import annotations

import asyncio
import gc
import sys
from pathlib import Path
from typing import Any

import pytest
from _kernel_helpers import is_running, pids_running

from ipybox_core.errors import ExecutorClosed, KernelDied
from ipybox_core.kernel import Kernel, KernelConfig

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inspects /proc")

# Code that starts children in three ways and prints their pids; the odd sleep durations make them
# recognisable.
START_CHILDREN = [
    "import subprocess, os\nchild = subprocess.Popen(['sleep', '{tag}1'])\nprint(child.pid)",
    "%%bash\nsleep {tag}2 > /dev/null 2>&1 &\necho $!",
    "import os\nos.system('sleep {tag}3 > /dev/null 2>&1 &')",
]


async def start_children(kernel: Kernel, tag: str) -> set[int]:
    for code in START_CHILDREN:
        output = await kernel.run(code.format(tag=tag))
        assert output.error is None, output.error
    pids = set().union(*(pids_running(f"sleep {tag}{i}") for i in (1, 2, 3)))
    assert len(pids) == 3, "all three children run"
    return pids


def kernel_files(kernel: Kernel) -> list[Path]:
    return sorted(kernel.runtime_dir.rglob("*"))


async def wait_gone(pids: set[int], seconds: float = 5.0) -> set[int]:
    """The pids still running after up to ``seconds`` (reaping by init may take a moment)."""
    loop = asyncio.get_running_loop()
    end = loop.time() + seconds
    while (alive := {p for p in pids if is_running(p)}) and loop.time() < end:
        await asyncio.sleep(0.02)
    return alive


async def test_shutdown_leaves_nothing_behind() -> None:
    kernel = await Kernel.start()
    runtime_dir = kernel.runtime_dir
    pid = kernel.pid
    assert pid is not None
    children = await start_children(kernel, "101.1")
    sockets = [p for p in kernel_files(kernel) if p.is_socket()]
    assert len(sockets) == 5, "the kernel's five ipc sockets live in the runtime directory"
    assert {p.parent for p in sockets} == {runtime_dir / f"{sockets[0].parent.name}"}, "in one directory"
    assert runtime_dir.stat().st_mode & 0o777 == 0o700

    await kernel.shutdown()
    assert await wait_gone({pid, *children}) == set()
    assert not runtime_dir.exists()
    assert not kernel.is_alive
    with pytest.raises(ExecutorClosed):
        await kernel.run("1")
    await kernel.shutdown()  # idempotent


async def test_crash_kills_the_kernels_children_too() -> None:
    async with Kernel() as kernel:
        children = await start_children(kernel, "101.2")
        with pytest.raises(KernelDied):
            await kernel.run("import os\nos._exit(1)")
        assert await wait_gone(children) == set(), "the dead kernel's children are killed with it"
        assert (await kernel.run("'alive again'")).text == "'alive again'\n"


async def test_cancelling_the_owning_task_mid_execution_cleans_up(tmp_path: Path) -> None:
    started = tmp_path / "started"
    seen: dict[str, Any] = {}

    async def owner() -> None:
        async with Kernel() as kernel:
            seen["runtime_dir"] = kernel.runtime_dir
            seen["pid"] = kernel.pid
            seen["children"] = await start_children(kernel, "101.3")
            await kernel.run(f"open({str(started)!r}, 'w').close()\nwhile True: pass")

    task = asyncio.create_task(owner())
    while not started.exists():
        assert not task.done(), task
        await asyncio.sleep(0.02)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await wait_gone({seen["pid"], *seen["children"]}) == set()
    assert not Path(seen["runtime_dir"]).exists()


async def test_dropping_a_kernel_without_shutdown_still_cleans_up() -> None:
    kernel = await Kernel.start()
    pid, runtime_dir = kernel.pid, kernel.runtime_dir
    children = await start_children(kernel, "101.4")
    del kernel
    gc.collect()
    assert pid is not None
    assert await wait_gone({pid, *children}) == set()
    assert not runtime_dir.exists()


async def test_given_runtime_dir_is_kept_and_shared(tmp_path: Path) -> None:
    runtime_dir = tmp_path / "rt"
    runtime_dir.mkdir(mode=0o700)
    foreign = runtime_dir / "tools.sock"
    foreign.write_text("not the kernel's")
    config = KernelConfig(runtime_dir=runtime_dir)
    async with Kernel(config) as first, Kernel(config) as second:
        assert first.runtime_dir == second.runtime_dir == runtime_dir
        await first.run("which = 'first'")
        await second.run("which = 'second'")
        assert (await first.run("which")).text == "'first'\n"
    assert sorted(runtime_dir.iterdir()) == [foreign]


async def test_runtime_dir_too_long_for_sockets_is_a_config_error(tmp_path: Path) -> None:
    from ipybox_core.errors import ConfigError

    deep = tmp_path / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    with pytest.raises(ConfigError, match="too long for unix socket paths"):
        await Kernel.start(KernelConfig(runtime_dir=deep))


async def test_shutdown_flushes_files_the_code_left_open(tmp_path: Path) -> None:
    target = tmp_path / "unclosed.txt"
    kernel = await Kernel.start(KernelConfig(cwd=tmp_path))
    await kernel.run(f"handle = open({str(target)!r}, 'w')\nhandle.write('buffered data')")
    assert target.read_text() == "", "still in the kernel's buffer"
    await kernel.shutdown()
    assert target.read_text() == "buffered data"


async def test_directories_of_a_killed_application_are_swept(monkeypatch: pytest.MonkeyPatch) -> None:
    """An application killed with SIGKILL cannot clean up: its kernel exits by itself (it watches
    its parent) and the next kernel started on the machine removes the orphaned directory."""
    script = (
        "import asyncio, os, signal\n"
        "from ipybox_core.kernel import Kernel\n"
        "async def main():\n"
        "    kernel = await Kernel.start()\n"
        "    print(kernel.runtime_dir, kernel.pid, flush=True)\n"
        "    os.kill(os.getpid(), signal.SIGKILL)\n"
        "asyncio.run(main())\n"
    )
    application = await asyncio.create_subprocess_exec(
        sys.executable, "-c", script, stdout=asyncio.subprocess.PIPE
    )
    line = await application.stdout.readline()  # type: ignore[union-attr]
    await application.wait()
    assert application.returncode == -9
    runtime_dir, kernel_pid = Path(line.split()[0].decode()), int(line.split()[1])
    assert runtime_dir.is_dir()
    assert await wait_gone({kernel_pid}, seconds=10) == set(), "the orphaned kernel exits by itself"

    monkeypatch.setattr("ipybox_core.kernel._stale_dirs._swept", set())
    async with Kernel():
        assert not runtime_dir.exists()
