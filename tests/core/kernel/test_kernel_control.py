"""Timeouts, interrupts and restarts, in both interrupt modes (signal and control-channel message), on
both backends (local and on a Jupyter Kernel Gateway)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from _backends import BACKENDS, make_kernel

from ipybox_core.errors import ExecutionTimeout, KernelError
from ipybox_core.kernel import (
    Deadline,
    ExecutionError,
    ExecutionFinished,
    Kernel,
    KernelConfig,
    StreamText,
)
from ipybox_core.kernel._base import KernelBase

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(
    scope="module",
    loop_scope="module",
    params=[(backend, mode) for backend in BACKENDS for mode in ("signal", "message")],
    ids=lambda param: "-".join(param),
)
async def kernel(request: pytest.FixtureRequest) -> AsyncIterator[KernelBase]:
    backend, mode = request.param
    config = KernelConfig(interrupt_mode=mode, interrupt_grace=1.0)
    async with make_kernel(request, backend, config) as kernel:
        yield kernel


async def pid_of(kernel: KernelBase) -> int:
    return int((await kernel.run("import os; print(os.getpid())")).text)


async def test_timeout_interrupts_an_infinite_loop_and_keeps_state(kernel: KernelBase) -> None:
    await kernel.run("kept = 'state'")
    with pytest.raises(ExecutionTimeout) as raised:
        await kernel.run("while True: pass", timeout=0.5)
    assert raised.value.timeout == 0.5
    assert "state is kept" in str(raised.value)
    assert (await kernel.run("kept")).text == "'state'\n"


async def test_timeout_yields_output_produced_before_it(kernel: KernelBase) -> None:
    events: list[object] = []

    async def consume() -> None:
        async for event in kernel.execute("print('before', flush=True)\nwhile True: pass", timeout=0.5):
            events.append(event)

    with pytest.raises(ExecutionTimeout):
        await consume()
    assert events == [StreamText("stdout", "before\n")], "the interrupt is reported as the timeout only"


async def test_timeout_interrupts_a_shell_command(kernel: KernelBase) -> None:
    with pytest.raises(ExecutionTimeout):
        await kernel.run("!sleep 60", timeout=0.5)
    assert (await kernel.run("'after'")).text == "'after'\n"


async def test_paused_deadline_does_not_expire(kernel: KernelBase) -> None:
    deadline = Deadline(0.2)
    deadline.pause()  # e.g. while a human decides about a tool call
    output = await kernel.run("import time; time.sleep(0.5); 'done'", timeout=deadline)
    assert output.text == "'done'\n"
    deadline.resume()
    with pytest.raises(ExecutionTimeout):
        await kernel.run("import time; time.sleep(30)", timeout=deadline)


async def test_code_finishing_in_time_is_not_a_timeout(kernel: KernelBase) -> None:
    output = await kernel.run("import time; time.sleep(0.05); 'quick'", timeout=Deadline(30))
    assert output.text == "'quick'\n"


async def test_interrupt_raises_keyboard_interrupt_in_the_code(kernel: KernelBase) -> None:
    await kernel.run("survivor = 1")
    events = []
    async for event in kernel.execute("print('looping', flush=True)\nwhile True: pass"):
        events.append(event)
        if isinstance(event, StreamText):
            await kernel.interrupt()
    errors = [e for e in events if isinstance(e, ExecutionError)]
    assert [e.ename for e in errors] == ["KeyboardInterrupt"]
    assert isinstance(events[-1], ExecutionFinished) and events[-1].status == "error"
    assert (await kernel.run("survivor")).text == "1\n"


async def test_interrupt_while_idle_is_harmless(kernel: KernelBase) -> None:
    # Code run right after interrupt() returns is never the one interrupted. In message mode the
    # interrupt_request used to be left in flight: about 2 runs in 100 got a KeyboardInterrupt.
    for _ in range(100):
        await kernel.interrupt()
        assert (await kernel.run("1 + 1")).text == "2\n"
    assert kernel.is_alive


async def test_restart_gives_fresh_state_in_the_same_runtime_dir(kernel: KernelBase) -> None:
    await kernel.run("doomed = 1")
    runtime_dir = kernel.runtime_dir if isinstance(kernel, Kernel) else None
    pid, generation = await pid_of(kernel), kernel.generation
    await kernel.restart()
    if isinstance(kernel, Kernel):
        assert kernel.runtime_dir == runtime_dir
    assert await pid_of(kernel) != pid
    assert kernel.generation == generation + 1
    output = await kernel.run("doomed")
    assert output.error is not None and output.error.ename == "NameError"
    assert (await kernel.run("'fresh'")).text == "'fresh'\n"


@pytest.mark.parametrize("backend", BACKENDS)
async def test_code_ignoring_interrupts_gets_the_kernel_restarted(
    request: pytest.FixtureRequest, backend: str
) -> None:
    async with make_kernel(request, backend, KernelConfig(interrupt_grace=1.0)) as kernel:
        await kernel.run("lost = 1")
        generation = kernel.generation
        code = "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True: pass"
        with pytest.raises(ExecutionTimeout) as raised:
            await kernel.run(code, timeout=0.5)
        assert "restarted" in str(raised.value)
        assert kernel.generation == generation + 1
        assert kernel.is_alive
        output = await kernel.run("lost")
        assert output.error is not None and output.error.ename == "NameError"


async def test_zero_timeout_still_interrupts_promptly(kernel: KernelBase) -> None:
    # The interrupt is sent before the code started; it is repeated once the code runs.
    with pytest.raises(ExecutionTimeout) as raised:
        await kernel.run("import time\nwhile True: time.sleep(0.001)", timeout=0)
    assert "restarted" not in str(raised.value)


async def test_restart_during_an_execution_ends_it_with_an_error(kernel: KernelBase) -> None:
    events = kernel.execute("print('running', flush=True)\nwhile True: pass")
    assert await anext(events) == StreamText("stdout", "running\n")
    await kernel.restart()
    with pytest.raises(KernelError, match="restarted or shut down"):
        await anext(events)
    assert (await kernel.run("'after restart'")).text == "'after restart'\n"


async def test_environment_updates_survive_restarts(kernel: KernelBase, tmp_path: Path) -> None:
    (tmp_path / "survivor_module.py").write_text("NAME = 'survivor'\n")
    await kernel.update_environment({"TOOL_SERVER_ADDRESS": "unix:/x"}, python_path=[tmp_path])
    await kernel.restart()
    output = await kernel.run(
        "import os, survivor_module\nprint(os.environ['TOOL_SERVER_ADDRESS'], survivor_module.NAME)"
    )
    assert output.text == "unix:/x survivor\n"
