"""Kernels on a Jupyter Kernel Gateway: approvals, MCP connections and credentials stay here.

    pip install -e '.[gateway]'    # in the ipybox checkout
    python examples/gateway.py

Starts a local Jupyter Kernel Gateway (loopback, with a token) as a stand-in for a remote Kernel or
Enterprise Gateway, runs code on a kernel there that calls the demo shop MCP server through the
tool server in this process, and stops the gateway. Without the gateway extra it says so and exits.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import secrets
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from ipybox_core import ApprovalRequest, CodeExecutor, OutputChunk, ask_approval
from ipybox_core.kernel.gateway import GatewayConfig

SHOP = {"command": sys.executable, "args": ["-m", "ipybox_core.demo.server"]}
CODE = """
from mcptools.shop import list_products
print(len(list_products(category="games").products), "games")
"""


async def run_on_gateway(url: str, token: str, workspace: Path) -> None:
    # --8<-- [start:use]
    async with CodeExecutor(kernel_gateway=url, gateway_token=token, workspace=workspace) as ex:
        await ex.register_mcp_server("shop", SHOP)  # runs here; the kernel only gets the generated API
        async with ex.stream(CODE) as execution:
            async for event in execution:  # the same events as with a local kernel
                if isinstance(event, ApprovalRequest):
                    await ask_approval(event, auto=True)  # prints the question, answered "y (auto)"
                    await event.accept()
                elif isinstance(event, OutputChunk):
                    print(event.text, end="")
    # --8<-- [end:use]


def remote_config() -> GatewayConfig:
    """What a deployment with kernels on other machines passes (validated here, not connected)."""
    # --8<-- [start:config]
    return GatewayConfig(
        url="https://gateway.example.internal:8888",
        token="...",  # Authorization: token ...
        kernel_name="python_kubernetes",  # a kernel spec of the gateway (default: its default)
        verify="/etc/ssl/gateway-ca.pem",  # TLS verification of the gateway (True / False / CA bundle)
        tool_server_host="0.0.0.0",  # where the tool server listens (default 127.0.0.1)
        tool_server_port=9000,  # 0 (default): any free port
        tool_server_advertise="app.ns.svc.cluster.local",  # the name kernels use to reach it
        tool_server_certfile="tls.crt",
        tool_server_keyfile="tls.key",
        tool_server_ca="ca.crt",  # shipped into the kernel; it verifies the tool server with it
    )
    # --8<-- [end:config]


def start_local_gateway(directory: Path) -> tuple[subprocess.Popen[bytes], str, str]:
    """``jupyter kernelgateway`` on a free loopback port; returns the process, its URL and token."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    token = secrets.token_urlsafe(16)
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "kernel_gateway",
            "--KernelGatewayApp.ip=127.0.0.1",
            f"--KernelGatewayApp.port={port}",
            "--KernelGatewayApp.port_retries=0",
            f"--KernelGatewayApp.auth_token={token}",
        ],
        cwd=directory,
        env={**os.environ, "JUPYTER_RUNTIME_DIR": str(directory)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    request = urllib.request.Request(f"{url}/api/kernelspecs", headers={"Authorization": f"token {token}"})
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and process.poll() is None:
        try:
            with urllib.request.urlopen(request, timeout=2):
                return process, url, token
        except OSError:
            time.sleep(0.1)
    process.kill()
    process.wait()
    raise RuntimeError("the local kernel gateway did not start")


def main() -> int:
    print(f"a remote deployment would use: {remote_config().url}")
    if any(importlib.util.find_spec(name) is None for name in ("kernel_gateway", "websockets")):
        print("the gateway extra is not installed: pip install -e '.[gateway]'")
        return 0
    with tempfile.TemporaryDirectory(prefix="ipybox-gateway-") as tmp:
        process, url, token = start_local_gateway(Path(tmp))
        try:
            asyncio.run(run_on_gateway(url, token, Path(tmp) / "workspace"))
        finally:
            process.terminate()
            process.wait(timeout=30)
    return 0


if __name__ == "__main__":
    sys.exit(main())
