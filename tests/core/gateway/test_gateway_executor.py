"""What is particular to kernels on a real Jupyter Kernel Gateway: the tool server is reached over
TCP, the generated API is shipped into the kernel, deaths and restarts go through the gateway.

The executor's core cases run against the gateway too: ``tests/core/executor/test_executor_e2e.py``
parametrizes its executor over both backends."""

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

from core.executor.executor_kit import STDIO_SERVER, run
from ipybox_core import (
    ApprovalRequest,
    CodeExecutor,
    ConfigError,
    KernelDied,
)
from ipybox_core.kernel.gateway import GatewayKernel
from prerequisites import require
from servers.gateway import LocalGateway

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
            "from mcptools.test import add, count\nprint('x' in dir(), add(a=2, b=2), count())",
            approve_all=True,
        )
        assert result.text.strip() == "False 4 1"

        await ex.reset()
        result = await ex.execute(
            "from mcptools.test import count\nprint('add' in dir(), count())", approve_all=True
        )
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
