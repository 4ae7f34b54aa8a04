"""A real Jupyter Kernel Gateway on loopback, for the gateway tests and ``benchmarks/bench_scale.py``."""

from __future__ import annotations

import importlib.util
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2

from ipybox_core.kernel.gateway import GatewayConfig

START_TIMEOUT = 60.0


def kernelgateway_available() -> bool:
    """Whether ``jupyter-kernel-gateway`` and ``websockets`` (the ``gateway`` extra) are installed."""
    return all(importlib.util.find_spec(name) is not None for name in ("kernel_gateway", "websockets"))


@dataclass
class LocalGateway:
    """A ``jupyter kernelgateway`` process with a token, listing of kernels enabled."""

    process: subprocess.Popen[bytes]
    port: int
    token: str
    log: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def config(self, **options: Any) -> GatewayConfig:
        """A :class:`GatewayConfig` for this gateway (``options`` override fields)."""
        return GatewayConfig(url=self.url, token=self.token, **options)

    def request(self, method: str, path: str) -> httpx2.Response:
        headers = {"Authorization": f"token {self.token}"}
        return httpx2.request(method, self.url + path, headers=headers, timeout=30, trust_env=False)

    def kernels(self) -> list[dict[str, Any]]:
        """The kernels the gateway runs now."""
        response = self.request("GET", "/api/kernels")
        response.raise_for_status()
        kernels: list[dict[str, Any]] = response.json()
        return kernels

    def kernel_pids(self) -> set[int]:
        """Processes below the gateway (its kernels and what they started)."""
        from servers.processes import descendant_pids

        return descendant_pids(self.process.pid)

    def stop(self) -> set[int]:
        """Stop the gateway (SIGTERM, then SIGKILL); returns processes of it that are still alive."""
        children = self.kernel_pids()
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        deadline = time.monotonic() + 5
        alive = {pid for pid in children if _running(pid)}
        while alive and time.monotonic() < deadline:
            time.sleep(0.05)
            alive = {pid for pid in alive if _running(pid)}
        for pid in alive:
            os.kill(pid, signal.SIGKILL)
        return alive


def start_local_gateway(directory: Path, *extra_args: str) -> LocalGateway:
    """Start a kernel gateway on a free loopback port and wait until it answers."""
    token = secrets.token_urlsafe(16)
    port = _free_port()
    log = directory / "gateway.log"
    runtime = directory / "runtime"
    runtime.mkdir(exist_ok=True)
    env = {
        "PATH": os.environ.get("PATH", os.defpath),
        "HOME": os.environ.get("HOME", str(directory)),
        "LANG": os.environ.get("LANG", "C.UTF-8"),
        "JUPYTER_RUNTIME_DIR": str(runtime),
        "JUPYTER_PLATFORM_DIRS": "1",
    }
    with log.open("ab") as output:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "kernel_gateway",
                "--KernelGatewayApp.ip=127.0.0.1",
                f"--KernelGatewayApp.port={port}",
                "--KernelGatewayApp.port_retries=0",
                f"--KernelGatewayApp.auth_token={token}",
                "--JupyterWebsocketPersonality.list_kernels=True",
                "--JupyterApp.answer_yes=True",
                *extra_args,
            ],
            stdout=output,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=directory,
        )
    gateway = LocalGateway(process=process, port=port, token=token, log=log)
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the kernel gateway exited at start:\n{log.read_text()[-3000:]}")
        try:
            if gateway.request("GET", "/api/kernelspecs").status_code == 200:
                return gateway
        except httpx2.HTTPError:
            pass
        time.sleep(0.05)
    gateway.stop()
    raise RuntimeError(
        f"the kernel gateway did not start within {START_TIMEOUT:g} s:\n{log.read_text()[-3000:]}"
    )


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"
