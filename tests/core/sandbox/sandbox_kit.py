"""Shared helpers of the sandbox tests: prerequisites, sandboxed kernels, host-side servers."""

from __future__ import annotations

import json
import shutil
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ipybox_core.errors import SandboxUnavailable
from ipybox_core.kernel import Kernel, KernelConfig
from ipybox_core.sandbox import BwrapLauncher, SandboxPolicy, probe_sandbox
from prerequisites import require

ATTEMPT_HARNESS = r"""
import json as __json
def _write(path, text):
    with open(path, "w") as file:  # close() inside: a failing flush raises here, not in the GC
        file.write(text)
def __attempt(fn):
    try:
        value = fn()
    except BaseException as exc:
        return {"blocked": True, "detail": f"{type(exc).__name__}: {exc}"[:400]}
    return {"blocked": False, "detail": repr(value)[:400]}
"""


def require_bwrap() -> None:
    """Skip (fail in CI) unless bubblewrap is installed and works here."""
    require(shutil.which("bwrap") is not None, "bubblewrap (bwrap) is not installed")
    try:
        probe_sandbox()
    except SandboxUnavailable as exc:
        require(False, f"bubblewrap cannot run here: {exc}")


async def start_sandboxed(policy: SandboxPolicy, workspace: Path, **config: object) -> Kernel:
    """A kernel in bubblewrap, working directory ``workspace``."""
    launcher = BwrapLauncher(policy, workspace=workspace)
    return await Kernel.start(KernelConfig(cwd=workspace, launcher=launcher, **config))  # type: ignore[arg-type]


async def run_attempt(kernel: Kernel, attack: str) -> dict[str, object]:
    """Run ``attack`` (code defining ``def attack(): ...``) and return ``{"blocked", "detail"}``."""
    output = await kernel.run(ATTEMPT_HARNESS + attack + "\nprint(__json.dumps(__attempt(attack)))")
    assert output.error is None, f"attempt harness failed: {output.error}\n{output.text}"
    result: dict[str, object] = json.loads(output.text.strip().splitlines()[-1])
    return result


class LineServer:
    """A tiny stream server replying ``b"reached:<name>"`` to every connection (TCP or unix)."""

    def __init__(self, sock: socket.socket, name: str) -> None:
        self.sock = sock
        self.name = name
        self.connections = 0
        sock.listen(16)
        sock.settimeout(0.2)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except (TimeoutError, OSError):
                continue
            with conn:
                self.connections += 1
                conn.sendall(f"reached:{self.name}".encode())

    def close(self) -> None:
        self._stop.set()
        self._thread.join(2)
        self.sock.close()


@contextmanager
def tcp_server(host: str = "127.0.0.1") -> Iterator[LineServer]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind((host, 0))
    server = LineServer(sock, "tcp")
    try:
        yield server
    finally:
        server.close()


@contextmanager
def unix_server(address: str | bytes, name: str = "unix") -> Iterator[LineServer]:
    """A unix socket server at a path, or at an abstract address (``b"\\0name"``)."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(address)
    server = LineServer(sock, name)
    try:
        yield server
    finally:
        server.close()
        if isinstance(address, str):
            Path(address).unlink(missing_ok=True)
