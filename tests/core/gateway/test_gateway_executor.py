"""The executor's core cases with kernels on a real Jupyter Kernel Gateway: approvals stay in this
process, the tool server is reached over TCP, the generated API is shipped into the kernel."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from gateway_kit import LocalGateway

from core.executor.executor_kit import STDIO_SERVER, run
from ipybox_core import (
    ApprovalRequest,
    CodeExecutor,
    ConfigError,
    ExecutionTimeout,
    KernelDied,
    OutputChunk,
)
from ipybox_core.kernel.gateway import GatewayKernel
from prerequisites import require

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def executor(
    kernel_gateway: LocalGateway, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[CodeExecutor]:
    async with CodeExecutor(
        workspace=tmp_path_factory.mktemp("ws"),
        timeout=60,
        kernel_gateway=kernel_gateway.url,
        gateway_token=kernel_gateway.token,
    ) as ex:
        server = {**STDIO_SERVER, "env": {**STDIO_SERVER["env"], "TEST_SECRET": "s3cret-value"}}
        await ex.register_mcp_server("test", server)
        yield ex


def gateway_kernel(executor: CodeExecutor) -> GatewayKernel:
    kernel = executor._kernel
    assert isinstance(kernel, GatewayKernel)
    return kernel


async def test_the_kernel_runs_on_the_gateway_and_calls_back_over_tcp(
    executor: CodeExecutor, kernel_gateway: LocalGateway
) -> None:
    kernel = gateway_kernel(executor)
    assert kernel.kernel_id in {k["id"] for k in kernel_gateway.kernels()}
    done = await run(
        executor, "import os, mcptools.test\nprint(os.environ['IPYBOX_TOOL_SERVER'], mcptools.test.__file__)"
    )
    address, package_file = done.text.split()
    assert address.startswith("http://127.0.0.1:")
    assert kernel.remote_root is not None and package_file.startswith(kernel.remote_root)


async def test_approved_calls_return_typed_results(executor: CodeExecutor) -> None:
    code = (
        "from mcptools.test import add, stats, echo\n"
        "print(add(a=1, b=2), stats(values=[1, 2, 3]).mean, echo(message='hi'))\n"
    )
    done = await run(executor, code)
    assert done.result.error is None, done.result.error
    assert [r.name for r in done.requests] == ["test.add", "test.stats", "test.echo"]
    assert done.text.strip() == "3 2.0 hi"


async def test_rejections_are_permission_errors_with_clean_tracebacks(executor: CodeExecutor) -> None:
    code = (
        "from mcptools.test import add\n"
        "try:\n"
        "    add(a=1, b=1)\n"
        "except PermissionError as e:\n"
        "    print('rejected:', e)\n"
        "add(a=2, b=2)\n"
    )

    async def reject(request: ApprovalRequest) -> None:
        await request.reject("not today")

    done = await run(executor, code, reject)
    assert "rejected: test.add was rejected: not today" in done.text
    error = done.result.error
    assert error is not None and error.ename == "PermissionError"
    assert "add(a=2, b=2)" in error.traceback
    assert "ipybox_core" not in error.traceback and "mcptools/test" not in error.traceback


async def test_tool_error_reaches_the_code_as_tool_error(executor: CodeExecutor) -> None:
    code = (
        "from mcptools.test import fail\n"
        "from ipybox_core.runtime import ToolError\n"
        "try:\n"
        "    fail(kind='tool_error')\n"
        "except ToolError as e:\n"
        "    print('tool error:', e)\n"
    )
    done = await run(executor, code)
    assert "tool error:" in done.text and "the widget is broken" in done.text


async def test_parallel_calls_from_threads_wait_for_approval_together(executor: CodeExecutor) -> None:
    code = (
        "from concurrent.futures import ThreadPoolExecutor\n"
        "from mcptools.test import add\n"
        "with ThreadPoolExecutor(4) as pool:\n"
        "    print(sorted(pool.map(lambda i: add(a=i, b=100), range(4))))\n"
    )
    held: list[ApprovalRequest] = []
    seen_pending: list[int] = []

    async def hold_until_four(request: ApprovalRequest) -> None:
        held.append(request)
        if len(held) == 4:
            seen_pending.append(sum(r.pending for r in held))
            for r in held:
                await r.accept()

    done = await run(executor, code, hold_until_four)
    assert seen_pending == [4]
    assert "[100, 101, 102, 103]" in done.text


async def test_timeout_keeps_state_and_approval_time_does_not_count(executor: CodeExecutor) -> None:
    await run(executor, "kept = 'yes'")
    with pytest.raises(ExecutionTimeout):
        await run(executor, "while True:\n    pass", timeout=1)

    async def slow_human(request: ApprovalRequest) -> None:
        await asyncio.sleep(1.5)
        await request.accept()

    done = await run(
        executor, "from mcptools.test import add\nprint(kept, add(a=1, b=1))", slow_human, timeout=1
    )
    assert done.text.strip() == "yes 2"


async def test_output_streams_as_chunks_before_the_result(executor: CodeExecutor) -> None:
    done = await run(
        executor, "import time\nfor i in range(3):\n    print(i, flush=True)\n    time.sleep(0.05)"
    )
    assert "".join(c.text for c in done.chunks) == "0\n1\n2\n"
    assert all(isinstance(c, OutputChunk) for c in done.chunks)


async def test_images_from_tools_and_plots(executor: CodeExecutor) -> None:
    code = (
        "from mcptools.test import image\n"
        "img = image(width=2, height=2, colour='blue')\n"
        "display(img)\n"
        "import matplotlib.pyplot as plt\n"
        "plt.plot([1, 2, 3]); plt.show()\n"
    )
    done = await run(executor, code)
    assert len(done.result.images) == 2
    assert all(image.startswith(b"\x89PNG") for image in done.result.images)


async def test_secrets_and_host_environment_stay_out_of_the_kernel(executor: CodeExecutor) -> None:
    code = (
        "import os\n"
        "from mcptools.test import env_var\n"
        "print(env_var(name='TEST_SECRET'), os.environ.get('TEST_SECRET'), 'PYTEST_CURRENT_TEST' in os.environ)\n"
    )
    done = await run(executor, code)
    assert done.text.strip() == "s3cret-value None False"


async def test_wrong_token_is_refused_from_kernel_code(executor: CodeExecutor) -> None:
    code = (
        "import os\n"
        "from mcptools.test import add\n"
        "real = os.environ['IPYBOX_TOOL_TOKEN']\n"
        "os.environ['IPYBOX_TOOL_TOKEN'] = 'forged'\n"
        "try:\n"
        "    add(a=1, b=2)\n"
        "except PermissionError as e:\n"
        "    print('refused:', e)\n"
        "finally:\n"
        "    os.environ['IPYBOX_TOOL_TOKEN'] = real\n"
    )
    done = await run(executor, code)
    assert "refused: the ipybox tool server refused the call: invalid token" in done.text
    assert done.requests == []


async def test_death_while_a_call_waits_then_reset_keeps_the_api(
    kernel_gateway: LocalGateway, tmp_path: Path
) -> None:
    async with CodeExecutor(workspace=tmp_path, kernel_gateway=kernel_gateway.config()) as ex:
        await ex.register_mcp_server("test", STDIO_SERVER)
        pid = int((await ex.execute("import os\nprint(os.getpid())")).text)
        execution = ex.stream("from mcptools.test import add\nx = 1\nadd(a=1, b=2)")
        request = await anext(execution)
        assert isinstance(request, ApprovalRequest)
        os.kill(pid, signal.SIGKILL)
        with pytest.raises(KernelDied):
            async for _ in execution:
                pass
        for _ in range(100):
            if not request.pending:
                break
            await asyncio.sleep(0.05)
        assert not request.pending and not ex.busy
        result = await ex.execute(
            "from mcptools.test import add, count\nprint('x' in dir(), add(a=2, b=2), count())"
        )
        assert result.text.strip() == "False 4 1"

        await ex.reset()
        result = await ex.execute("from mcptools.test import count\nprint('add' in dir(), count())")
        assert result.text.strip() == "False 1"  # fresh kernel state, API shipped again, MCP server restarted


async def test_registering_later_replacing_and_unregistering(
    kernel_gateway: LocalGateway, tmp_path: Path
) -> None:
    async with CodeExecutor(
        workspace=tmp_path, approval="never", kernel_gateway=kernel_gateway.config()
    ) as ex:
        assert (
            await ex.execute("import importlib.util\nprint(importlib.util.find_spec('mcptools'))")
        ).text.strip() == "None"
        await ex.register_mcp_server("test", STDIO_SERVER)
        assert (await ex.execute("from mcptools.test import add\nprint(add(a=1, b=1))")).text.strip() == "2"
        await ex.register_mcp_server(
            "test", {"command": STDIO_SERVER["command"], "args": ["-m", "ipybox_core.demo.server"]}
        )
        result = await ex.execute(
            "import mcptools.test as t\nprint(hasattr(t, 'add'), hasattr(t, 'list_products'))"
        )
        assert result.text.strip() == "False True"
        await ex.unregister_mcp_server("test")
        result = await ex.execute("try:\n    import mcptools.test\nexcept ImportError:\n    print('gone')")
        assert result.text.strip() == "gone"


async def test_shell_approval_over_a_tls_tool_server(kernel_gateway: LocalGateway, tmp_path: Path) -> None:
    require(shutil.which("openssl") is not None, "openssl is not installed")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )  # fmt: skip
    gateway = kernel_gateway.config(
        tool_server_certfile=str(cert), tool_server_keyfile=str(key), tool_server_ca=str(cert)
    )
    async with CodeExecutor(workspace=tmp_path / "ws", approve_shell=True, kernel_gateway=gateway) as ex:

        async def allow_echo(request: ApprovalRequest) -> None:
            if "echo" in request.args["command"]:
                await request.accept()
            else:
                await request.reject("no deleting")

        done = await run(
            ex,
            "import os\nprint(os.environ['IPYBOX_TOOL_SERVER'][:8])\n!echo hello-$((1+2))\n!rm -rf /x",
            allow_echo,
        )
        assert [r.args["command"] for r in done.requests] == ["echo hello-$((1+2))", "rm -rf /x"]
        assert done.text.startswith("https://\nhello-3")
        assert done.result.error is not None and "no deleting" in done.result.error.evalue
        kernel_id = gateway_kernel(ex).kernel_id
    assert kernel_id not in {k["id"] for k in kernel_gateway.kernels()}


async def test_sandbox_with_a_gateway_is_refused_clearly(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="isolation"):
        CodeExecutor(workspace=tmp_path, sandbox=True, kernel_gateway="http://127.0.0.1:9")
    with pytest.raises(ConfigError, match="http"):
        CodeExecutor(workspace=tmp_path, kernel_gateway="127.0.0.1:8888")


async def test_output_printed_before_a_call_precedes_its_approval_request(executor: CodeExecutor) -> None:
    code = "from mcptools.test import add\nfor i in range(5):\n    print('line', i)\n    add(a=i, b=0)\n"
    order: list[str] = []
    async with executor.stream(code) as execution:
        async for event in execution:
            if isinstance(event, ApprovalRequest):
                order.append(f"ask {event.args['a']}")
                await event.accept()
            elif isinstance(event, OutputChunk):
                order.extend(line for line in event.text.splitlines())
    assert order == [entry for i in range(5) for entry in (f"line {i}", f"ask {i}")]
