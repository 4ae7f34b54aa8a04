"""Helpers for the ipybox MCP server tests: the real ``ipybox mcp`` process driven by the official
MCP client, elicitation answers, and the processes the server leaves (or must not leave) behind."""

from __future__ import annotations

import asyncio
import base64
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import EllipsisType
from typing import Any

from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp_types import CallToolResult, ElicitRequestFormParams, ElicitResult, ImageContent, TextContent

from servers import PYTHON, RAW_SERVER_SCRIPT, SERVE_SCRIPT
from servers.processes import descendant_pids

ECHO_SERVER: dict[str, Any] = {"command": PYTHON, "args": [str(RAW_SERVER_SCRIPT), "--clean"]}
"""A stdio MCP server that starts in ~50 ms (``echo``, ``pid``, ...)."""
TEST_SERVER: dict[str, Any] = {
    "command": PYTHON,
    "args": [str(SERVE_SCRIPT), "stdio"],
    "env": {"PYTHONUNBUFFERED": "1"},
}
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
INITIALIZE_2025_11: dict[str, Any] = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    },
}
"""An ``initialize`` request of protocol 2025-11-25, for tests that speak JSON-RPC by hand."""

# Kernel-side code displaying a 3x2 red PNG (built with the stdlib only).
DISPLAY_PNG = """\
import struct, zlib
from IPython.display import Image, display

def _chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

_rows = b"".join(b"\\x00" + b"\\xff\\x00\\x00" * 3 for _ in range(2))
_png = (b"\\x89PNG\\r\\n\\x1a\\n" + _chunk(b"IHDR", struct.pack(">IIBBBBB", 3, 2, 8, 2, 0, 0, 0))
        + _chunk(b"IDAT", zlib.compress(_rows)) + _chunk(b"IEND", b""))
display(Image(data=_png))
print("displayed")
"""


IPYBOX = (sys.executable, "-m", "ipybox_core.cli")
"""The ``ipybox`` command of this interpreter (the venv's)."""


def ipybox_mcp_command(workspace: Path, *args: str, program: Sequence[str] = IPYBOX) -> list[str]:
    """``ipybox mcp --workspace WORKSPACE ARGS`` with this interpreter (the venv's ``ipybox``)."""
    return [*program, "mcp", "--workspace", str(workspace), *args]


@dataclass
class Elicitations:
    """An elicitation callback that records every question and answers from a queue (default accept)."""

    answers: list[str] = field(default_factory=list)
    messages: list[str] = field(default_factory=list)
    hold: asyncio.Event | None = None
    """When set, each answer waits for this event (to keep an approval pending)."""
    asked: asyncio.Event = field(default_factory=asyncio.Event)

    async def __call__(self, context: Any, params: Any) -> ElicitResult:
        assert isinstance(params, ElicitRequestFormParams), params
        self.messages.append(params.message)
        self.asked.set()
        if self.hold is not None:
            await self.hold.wait()
        action = self.answers.pop(0) if self.answers else "accept"
        return ElicitResult(action=action, content={} if action == "accept" else None)  # type: ignore[arg-type]


class ClientActor:
    """An ``mcp.Client`` entered and exited by one background task, usable from any test task.

    (An anyio task group must be exited by the task that entered it; pytest-asyncio runs a
    module fixture's setup and teardown in different tasks.)
    """

    def __init__(self, client: Client) -> None:
        self.client = client
        self._ready = asyncio.Event()
        self._stop = asyncio.Event()
        self._error: BaseException | None = None
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Client:
        self._task = asyncio.create_task(self._run())
        await self._ready.wait()
        if self._error is not None:
            raise self._error
        return self.client

    async def __aexit__(self, *exc: object) -> None:
        """Close the client (again: a no-op)."""
        self._stop.set()
        assert self._task is not None
        await self._task

    async def _run(self) -> None:
        try:
            async with self.client:
                self._ready.set()
                await self._stop.wait()
        except BaseException as error:
            self._error = error
            self._ready.set()


def stdio_client(
    workspace: Path, *args: str, mode: str = "legacy", elicitations: Elicitations | None = None
) -> Client:
    command = ipybox_mcp_command(workspace, *args)
    params = StdioServerParameters(command=command[0], args=command[1:], env={"PYTHONUNBUFFERED": "1"})
    return Client(params, mode=mode, elicitation_callback=elicitations, read_timeout_seconds=120)  # type: ignore[arg-type]


def text_of(result: CallToolResult) -> str:
    return "\n".join(block.text for block in result.content if isinstance(block, TextContent))


def images_of(result: CallToolResult) -> list[bytes]:
    return [base64.b64decode(block.data) for block in result.content if isinstance(block, ImageContent)]


# --- processes ------------------------------------------------------------------------------


def pids_with_argument(argument: str) -> list[int]:
    """Processes whose command line contains ``argument`` exactly (as one argv item)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argument.encode() in argv:
            found.append(int(entry.name))
    return found


def descendants(root: int) -> set[int]:
    """``root`` and every process below it (by parent pid)."""
    return {root} | descendant_pids(root)


def alive(pids: Iterable[int]) -> set[int]:
    """The processes of ``pids`` that still exist and are not zombies."""
    living = set()
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z":
            living.add(pid)
    return living


async def wait_gone(pids: Iterable[int], timeout: float = 30.0) -> set[int]:
    """Wait until none of ``pids`` is alive; returns those still alive at the timeout."""
    pids = set(pids)
    deadline = time.monotonic() + timeout
    while (left := alive(pids)) and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    return left


def server_tree(workspace: Path) -> set[int]:
    """The ``ipybox mcp`` process serving ``workspace`` and all its descendants."""
    roots = [pid for pid in pids_with_argument(str(workspace)) if pid != os.getpid()]
    tree: set[int] = set()
    for root in roots:
        tree |= descendants(root)
    return tree


@dataclass
class HttpIpybox:
    """An ``ipybox mcp --transport streamable-http --port 0`` process, its URL and the token it printed."""

    process: subprocess.Popen[bytes]
    url: str
    workspace: Path
    token: str | None
    log: Path

    def client(
        self,
        *,
        mode: str = "legacy",
        elicitations: Elicitations | None = None,
        token: str | EllipsisType | None = ...,
        session: str | None = None,
    ) -> Client:
        """A client sending ``token`` (default: the printed one) and, if given, ``Ipybox-Session``."""
        return http_client(
            self.url,
            self.token if token is ... else token,
            mode=mode,
            elicitations=elicitations,
            session=session,
        )

    def stop(self, signum: int = signal.SIGTERM, timeout: float = 30.0) -> int:
        """Send ``signum``, then wait; returns the exit code (SIGKILL after ``timeout``)."""
        if self.process.poll() is None:
            self.process.send_signal(signum)
            try:
                return self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
        return self.process.wait()


def http_client(
    url: str,
    token: str | None,
    *,
    mode: str = "legacy",
    elicitations: Elicitations | None = None,
    session: str | None = None,
) -> Client:
    """An MCP client of ``url`` that authenticates with ``token`` (none if ``None``)."""
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    if session is not None:
        headers["Ipybox-Session"] = session
    transport = streamable_http_client(url, http_client=create_mcp_http_client(headers=headers))
    return Client(transport, mode=mode, elicitation_callback=elicitations, read_timeout_seconds=120)


def start_http_ipybox(
    workspace: Path,
    *args: str,
    timeout: float = 60.0,
    env: dict[str, str] | None = None,
    program: Sequence[str] = IPYBOX,
) -> HttpIpybox:
    """Start ``ipybox mcp`` (``program``: another command line taking ipybox's arguments) over
    Streamable HTTP on a free port; its stderr goes to a log file."""
    log = workspace.parent / f"{workspace.name}.stderr.log"
    with log.open("wb") as stderr:
        process = subprocess.Popen(
            ipybox_mcp_command(
                workspace, "--transport", "streamable-http", "--port", "0", *args, program=program
            ),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            env={**os.environ, **(env or {})},
        )
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and process.poll() is None:
        text = log.read_text()
        match = re.search(r"listening on (http://\S+)", text)
        if match:
            printed = re.search(r'"Authorization: Bearer ([^"<>]+)"', text)
            token = printed.group(1) if printed else None
            return HttpIpybox(process, match.group(1), workspace, token, log)
        time.sleep(0.05)
    process.kill()
    process.wait()
    raise RuntimeError(f"ipybox mcp did not start:\n{log.read_text()}")


PROBE_DISTRIBUTION = "ipybox-install-probe"
PROBE_MODULE = "ipybox_install_probe"


def build_probe_wheel(folder: Path, answer: int = 42) -> Path:
    """A minimal pure-Python wheel (module ``ipybox_install_probe`` with ``ANSWER``), no network needed."""
    import hashlib
    import zipfile

    files = {
        f"{PROBE_MODULE}/__init__.py": f"ANSWER = {answer}\n",
        f"{PROBE_MODULE}-0.1.dist-info/METADATA": f"Metadata-Version: 2.1\nName: {PROBE_DISTRIBUTION}\nVersion: 0.1\n",
        f"{PROBE_MODULE}-0.1.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: ipybox-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = []
    for name, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{name},sha256={digest},{len(text.encode())}")
    record_name = f"{PROBE_MODULE}-0.1.dist-info/RECORD"
    files[record_name] = "\n".join([*record, f"{record_name},,"]) + "\n"
    wheel = folder / f"{PROBE_MODULE}-0.1-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for name, text in files.items():
            archive.writestr(name, text)
    return wheel


def uninstall_probe() -> None:
    subprocess.run(
        [sys.executable, "-m", "pip", "uninstall", "-y", "-q", PROBE_DISTRIBUTION],
        check=False,
        capture_output=True,
    )


def sessions_roots(workspace: Path) -> list[Path]:
    """The roots of the client sessions' working directories (``.ipybox-sessions/run-*``: one per
    start of the server; removed when it stops)."""
    from ipybox_core.mcp_server.service import RUN_PREFIX, SESSIONS_DIR

    container = workspace / SESSIONS_DIR
    return sorted(container.glob(f"{RUN_PREFIX}*")) if container.is_dir() else []


def session_dirs(workspace: Path) -> set[str]:
    """The client sessions' working directories (not the warm pool's ``.warm-*`` ones)."""
    return {
        e.name
        for root in sessions_roots(workspace)
        for e in root.iterdir()
        if e.is_dir() and not e.name.startswith(".")
    }


def session_path(workspace: Path, name: str) -> Path:
    """The working directory ``name`` (from :func:`session_dirs`)."""
    (path,) = [root / name for root in sessions_roots(workspace) if (root / name).is_dir()]
    return path
