"""GatewayKernel against a real Jupyter Kernel Gateway: the local Kernel's events and semantics over
REST + websocket, code shipped into the kernel, deaths, lost connections, restarts, clean-up."""

from __future__ import annotations

import asyncio
import gc
import os
import signal
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from ipybox_core.errors import (
    ConfigError,
    ExecutionTimeout,
    ExecutorBusy,
    KernelDied,
    KernelStartError,
)
from ipybox_core.kernel import (
    DisplayData,
    ExecutionFinished,
    Kernel,
    KernelConfig,
    KernelEvent,
    LaunchSpec,
    StreamText,
)
from ipybox_core.kernel.backend import KernelBackend
from ipybox_core.kernel.gateway import GatewayConfig, GatewayKernel
from servers.gateway import LocalGateway

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def kernel(kernel_gateway: LocalGateway) -> AsyncIterator[GatewayKernel]:
    config = KernelConfig(env={"GIVEN_VAR": "given"}, output_limit=2000)
    async with GatewayKernel(kernel_gateway.config(), config) as kernel:
        yield kernel


async def events_of(kernel: GatewayKernel, code: str) -> list[KernelEvent]:
    return [event async for event in kernel.execute(code)]


async def pid_of(kernel: GatewayKernel) -> int:
    return int((await kernel.run("import os; print(os.getpid())")).text)


async def test_both_backends_satisfy_the_protocol(kernel: GatewayKernel) -> None:
    assert isinstance(kernel, KernelBackend)
    assert isinstance(Kernel(), KernelBackend)


async def test_state_events_and_execution_counts(kernel: GatewayKernel) -> None:
    await kernel.run("counter = 41")
    first = await events_of(kernel, "counter += 1\ncounter")
    second = await events_of(kernel, "counter")
    assert first[0] == DisplayData({"text/plain": "42"}, is_result=True)
    assert isinstance(first[-1], ExecutionFinished) and first[-1].status == "ok"
    assert isinstance(second[-1], ExecutionFinished)
    assert second[-1].execution_count == (first[-1].execution_count or 0) + 1


async def test_stdout_and_stderr_stream_live_in_order(kernel: GatewayKernel, tmp_path: Path) -> None:
    # The code waits for a file the test only creates once it saw the first chunk (same machine).
    flag = tmp_path / "go"
    code = (
        "import os, sys, time\n"
        "print('out', flush=True)\n"
        "print('err', file=sys.stderr, flush=True)\n"
        f"while not os.path.exists({str(flag)!r}): time.sleep(0.01)\n"
        "print('last')\n"
    )
    seen: list[tuple[str, str]] = []
    async for event in kernel.execute(code, timeout=60):
        if isinstance(event, StreamText):
            seen.append((event.name, event.text))
            if event.name == "stderr":
                flag.touch()
    assert seen == [("stdout", "out\n"), ("stderr", "err\n"), ("stdout", "last\n")]


async def test_rich_output_and_matplotlib_figures(kernel: GatewayKernel) -> None:
    output = await kernel.run(
        "from IPython.display import HTML, display\n"
        "display(HTML('<b>bold</b>'))\n"
        "import matplotlib.pyplot as plt\n"
        "plt.plot([1, 3, 2]);"
    )
    assert output.error is None, output.error
    assert [d.html for d in output.displays][:1] == ["<b>bold</b>"]
    assert len(output.images) == 1 and output.images[0].startswith(b"\x89PNG\r\n\x1a\n")


async def test_tracebacks_are_clean_and_hide_shipped_frames(kernel: GatewayKernel) -> None:
    output = await kernel.run("def f():\n    1 / 0\nf()")
    assert output.error is not None and output.error.ename == "ZeroDivisionError"
    assert "\x1b[" not in output.error.traceback and "1 / 0" in output.error.traceback
    # The shipped runtime fails inside its own frames (no tool server configured here).
    output = await kernel.run("from ipybox_core import runtime\nruntime.call_tool('s', 't', {})")
    assert output.error is not None and output.error.ename == "ToolServerUnavailable"
    assert kernel.remote_root is not None
    assert kernel.remote_root not in output.error.traceback
    assert "runtime.call_tool('s', 't', {})" in output.error.traceback


async def test_runtime_is_shipped_into_a_private_directory(kernel: GatewayKernel) -> None:
    output = await kernel.run(
        "import sys, ipybox_core.runtime as r\n"
        "print(r.__file__)\n"
        "print(sys.path[0])\n"
        "print(sorted(n for n in sys.modules if n.startswith('ipybox_core')))"
    )
    root = kernel.remote_root
    assert root is not None
    assert output.text.splitlines() == [
        f"{root}/ipybox_core/inkernel/runtime.py",  # ipybox_core.runtime is that module
        root,
        "['ipybox_core', 'ipybox_core.errors', 'ipybox_core.inkernel', 'ipybox_core.inkernel.errors', "
        "'ipybox_core.inkernel.runtime', 'ipybox_core.runtime']",
    ]


async def test_environment_is_the_configured_one(kernel: GatewayKernel) -> None:
    output = await kernel.run(
        "import os\nprint(os.environ.get('GIVEN_VAR'), 'JUPYTER_RUNTIME_DIR' in os.environ, os.environ['MPLBACKEND'])"
    )
    # the gateway's own environment (JUPYTER_RUNTIME_DIR) does not reach the kernel
    assert output.text == "given False module://matplotlib_inline.backend_inline\n"


async def test_timeout_interrupts_and_keeps_state(kernel: GatewayKernel) -> None:
    await kernel.run("kept = 'yes'")
    with pytest.raises(ExecutionTimeout) as raised:
        await kernel.run("while True: pass", timeout=0.5)
    assert "state is kept" in str(raised.value)
    with pytest.raises(ExecutionTimeout):
        await kernel.run("import time\nwhile True: time.sleep(0.001)", timeout=0)
    assert (await kernel.run("print(kept)")).text == "yes\n"


async def test_interrupt_raises_keyboard_interrupt(kernel: GatewayKernel) -> None:
    events = kernel.execute("print('go', flush=True)\nimport time\ntime.sleep(30)")
    assert await anext(events) == StreamText("stdout", "go\n")
    await kernel.interrupt()
    rest = [event async for event in events]
    assert isinstance(rest[-1], ExecutionFinished) and rest[-1].status == "error"
    await kernel.interrupt()  # idle: harmless
    assert (await kernel.run("'ok'")).text == "'ok'\n"


async def test_second_execution_is_refused_and_abandoning_interrupts(kernel: GatewayKernel) -> None:
    running = kernel.execute("print('running', flush=True)\nimport time\nwhile True: time.sleep(0.01)")
    assert await anext(running) == StreamText("stdout", "running\n")
    with pytest.raises(ExecutorBusy):
        await kernel.run("1")
    await running.aclose()  # dropped: the kernel must be interrupted, not left busy
    assert (await kernel.run("'next'", timeout=30)).text == "'next'\n"


async def test_packages_and_environment_are_shipped_and_survive_restarts(kernel: GatewayKernel) -> None:
    kernel.install_package(
        "shipped/pkg", {"__init__.py": "from .mod import VALUE\n", "mod.py": "VALUE = 7\n"}
    )
    assert (await kernel.run("from shipped.pkg import VALUE\nprint(VALUE)")).text == "7\n"
    kernel.install_package("shipped/pkg", {"__init__.py": "VALUE = 8\n"})
    await kernel.run(
        "import sys\nfor m in [m for m in sys.modules if m.startswith('shipped')]: del sys.modules[m]"
    )
    assert (await kernel.run("from shipped.pkg import VALUE\nprint(VALUE)")).text == "8\n"
    await kernel.update_environment({"LATER_VAR": "later"}, python_path=[Path("/nonexistent-dir")])
    generation = kernel.generation
    await kernel.restart()
    assert kernel.generation == generation + 1
    output = await kernel.run(
        "import os, sys\nfrom shipped.pkg import VALUE\n"
        "print(VALUE, os.environ['LATER_VAR'], '/nonexistent-dir' in sys.path, 'kept' in dir())"
    )
    assert output.text == "8 later True False\n"
    kernel.uninstall_package("shipped/pkg")
    output = await kernel.run("import sys\nsys.modules.pop('shipped.pkg', None)\nimport shipped.pkg")
    assert output.error is not None and output.error.ename == "ModuleNotFoundError"


async def test_death_during_execution_and_while_idle(
    kernel_gateway: LocalGateway, kernel: GatewayKernel
) -> None:
    live_root = Path(str(kernel.remote_root))  # another kernel, alive all along: its root stays
    config = KernelConfig(interrupt_mode="message", env={"GIVEN_VAR": "given"})
    async with GatewayKernel(kernel_gateway.config(), config) as dying:
        dying.install_package("pkg_after_death", {"__init__.py": "NAME = 'shipped'\n"})
        await dying.run("doomed = 1")
        with pytest.raises(ExecutionTimeout):  # interrupts as control-channel messages work too
            await dying.run("while True: pass", timeout=0.3)
        kernel_id, generation = dying.kernel_id, dying.generation
        events = dying.execute("import os, time\nprint('dying', flush=True)\ntime.sleep(0.3)\nos._exit(1)")
        with pytest.raises(KernelDied, match="died while running the code"):
            async for _ in events:
                pass
        output = await dying.run("import os, pkg_after_death\nprint('doomed' in dir(), pkg_after_death.NAME)")
        assert output.text == "False shipped\n"
        assert dying.kernel_id == kernel_id and dying.generation > generation

        killed_root = Path(str(dying.remote_root))
        assert killed_root.is_dir() and killed_root.name.startswith("ipybox-gw-")
        os.kill(await pid_of(dying), signal.SIGKILL)  # now while idle
        for _ in range(200):
            if not dying.is_alive:
                break
            await asyncio.sleep(0.05)
        assert not dying.is_alive
        output = await dying.run(
            "import os, pkg_after_death\nprint(pkg_after_death.NAME, os.environ['GIVEN_VAR'])"
        )
        assert output.text == "shipped given\n"
        assert not killed_root.exists()  # atexit never ran: the new kernel's set-up swept it
        assert live_root.is_dir() and Path(str(dying.remote_root)).is_dir()


async def test_lost_websocket_reconnects_and_keeps_state(kernel_gateway: LocalGateway) -> None:
    async with GatewayKernel(kernel_gateway.config()) as kernel:
        await kernel.run("survivor = 'state'")
        events = kernel.execute("print('long', flush=True)\nimport time\ntime.sleep(1)")
        assert await anext(events) == StreamText("stdout", "long\n")
        generation = kernel.generation
        assert kernel._channels is not None
        await kernel._channels._ws.close()  # the connection drops (the gateway side sees a close)
        with pytest.raises(KernelDied, match="lost the websocket"):
            async for _ in events:
                pass
        assert (await kernel.run("print(survivor)", timeout=30)).text == "state\n"
        assert kernel.generation == generation


async def test_kernel_deleted_on_the_gateway_is_noticed(kernel_gateway: LocalGateway) -> None:
    async with GatewayKernel(kernel_gateway.config(liveness_interval=0.2)) as kernel:
        old_id = kernel.kernel_id
        events = kernel.execute("print('waiting', flush=True)\nimport time\ntime.sleep(30)")
        assert await anext(events) == StreamText("stdout", "waiting\n")
        assert kernel_gateway.request("DELETE", f"/api/kernels/{old_id}").status_code == 204
        with pytest.raises(KernelDied):
            async for _ in events:
                pass
        assert (await kernel.run("'again'")).text == "'again'\n"
        assert kernel.kernel_id != old_id
        assert old_id not in {k["id"] for k in kernel_gateway.kernels()}


async def test_shutdown_and_garbage_collection_delete_the_kernel(kernel_gateway: LocalGateway) -> None:
    kernel = await GatewayKernel.start(kernel_gateway.config())
    kernel_id = kernel.kernel_id
    await kernel.shutdown()
    await kernel.shutdown()  # idempotent
    assert kernel_id not in {k["id"] for k in kernel_gateway.kernels()}

    dropped: GatewayKernel | None = await GatewayKernel.start(kernel_gateway.config())
    assert dropped is not None and dropped._channels is not None
    kernel_id = dropped.kernel_id
    await dropped._channels.aclose()  # (the websocket's reader task would otherwise keep running)
    dropped = None
    gc.collect()
    assert kernel_id not in {k["id"] for k in kernel_gateway.kernels()}


async def test_start_failures_are_clear(kernel_gateway: LocalGateway) -> None:
    before = kernel_gateway.kernels()
    with pytest.raises(KernelStartError, match=r"HTTP 401.*token"):
        await GatewayKernel.start(GatewayConfig(url=kernel_gateway.url, token="wrong"))
    with pytest.raises(KernelStartError, match="no-such-kernel"):
        await GatewayKernel.start(kernel_gateway.config(kernel_name="no-such-kernel"))
    with pytest.raises(KernelStartError, match="cannot reach the kernel gateway"):
        await GatewayKernel.start(GatewayConfig(url="http://127.0.0.1:9"))
    assert kernel_gateway.kernels() == before


class _Wrapper:
    interrupt_mode = "message"

    def wrap(self, spec: LaunchSpec) -> LaunchSpec:
        return spec


async def test_what_cannot_apply_remotely_is_refused() -> None:
    gateway = GatewayConfig(url="http://127.0.0.1:9")
    with pytest.raises(ConfigError, match="isolation"):
        GatewayKernel(gateway, KernelConfig(launcher=_Wrapper()))
    with pytest.raises(ConfigError, match="kernel_args"):
        GatewayKernel(gateway, KernelConfig(kernel_args=["--x=1"]))
    with pytest.raises(ConfigError, match="http"):
        GatewayConfig(url="tcp://host:1")
    assert "secret" not in repr(GatewayConfig(url="http://h:1", token="secret"))
