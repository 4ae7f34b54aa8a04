"""Escape suite: each attempt to get out of the bubblewrap sandbox must fail, on a real kernel.

One sandboxed kernel is shared by the module (attempts that exhaust resources leave it alive and
clean up after themselves). ``control=True`` attempts also run in an unsandboxed kernel, where they
must escape: that proves the host-side checks detect an escape.
"""

from __future__ import annotations

import ctypes
import os
import platform
import secrets
import socket
import string
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import ipykernel
import pytest
import pytest_asyncio
from escape_attempts import ATTEMPTS, Attempt
from sandbox_kit import require_bwrap, run_attempt, start_sandboxed, tcp_server, unix_server

from ipybox_core.kernel import Kernel, KernelConfig
from ipybox_core.sandbox import ResourceLimits, SandboxPolicy

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.sandbox]

LIMITS = ResourceLimits(memory_mb=1024, max_processes=64, file_size_mb=16, tmp_size_mb=32, open_files=1024)
_KEYCTL = {"x86_64": (248, 250), "aarch64": (217, 219)}


@dataclass
class Host:
    """Everything planted on the host for the attempts, and the values the attack code gets."""

    base: Path
    home: Path
    workspace: Path
    secret: str
    values: dict[str, str] = field(default_factory=dict)
    victims: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def victim(self) -> subprocess.Popen[bytes]:
        env = {"PATH": os.defpath, "IPYBOX_HOST_SECRET": self.secret}
        process = subprocess.Popen(["sleep", "300"], env=env)
        self.victims.append(process)
        # Popen returns once exec has begun; the new image's environment shows in /proc a moment
        # later (empty until then, as a loaded machine showed): wait for it, as an attacker could
        deadline = time.monotonic() + 30
        while not Path(f"/proc/{process.pid}/environ").read_bytes() and time.monotonic() < deadline:
            time.sleep(0.01)
        return process

    def fill(self, text: str, **extra: str) -> str:
        return string.Template(text).substitute({**self.values, **extra})


def _plant(base: Path, secret: str) -> tuple[Path, Path]:
    home, workspace = base / "home", base / "ws"
    for directory in (home / ".ssh", home / ".aws", home / "project", workspace / "sub" / "deeper"):
        directory.mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text(f"-----BEGIN KEY----- {secret}\n")
    (home / ".aws" / "credentials").write_text(f"[default]\naws_secret_access_key = {secret}\n")
    (home / ".netrc").write_text(f"machine example.com login me password {secret}\n")
    (home / "project" / ".env").write_text(f"TOKEN={secret}\n")
    (home / "notes.txt").write_text("a readable note\n")
    for env_file in (
        workspace / ".env",
        workspace / "sub" / "deeper" / ".env",
        workspace / ".env.production",
    ):
        env_file.write_text(f"API_KEY={secret}\n")
    (workspace / "data.txt").write_text("workspace data\n")
    return home, workspace


def _host_ip() -> str:
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.connect(("192.0.2.1", 9))
            return str(probe.getsockname()[0])
    except OSError:
        return "127.0.0.1"


def _add_user_key(name: str, secret: str) -> int | None:
    numbers = _KEYCTL.get(platform.machine())
    if numbers is None:
        return None
    libc = ctypes.CDLL(None, use_errno=True)
    key = libc.syscall(numbers[0], b"user", name.encode(), secret.encode(), len(secret), -4)
    return key if key > 0 else None


def _remove_user_key(key: int | None) -> None:
    if key is not None:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.syscall(_KEYCTL[platform.machine()][1], 9, key, -4)  # KEYCTL_UNLINK from @u


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Host]:
    require_bwrap()
    base = tmp_path_factory.mktemp("escape")
    secret = f"SECRET-{secrets.token_hex(8)}"
    home, workspace = _plant(base, secret)
    token = secrets.token_hex(4)
    real_home = Path.home()
    marker = real_home / f".ipybox-escape-marker-{token}"
    marker.write_text("x")
    libc = ctypes.CDLL(None, use_errno=True)
    shm_key = int.from_bytes(secrets.token_bytes(3), "big") + 1
    shm_id = libc.shmget(shm_key, 4096, 0o1000 | 0o666)  # IPC_CREAT
    key = _add_user_key(f"ipybox-escape-{token}", secret)
    host_socket = str(base / "host.sock")
    abstract = f"ipybox-escape-{token}"
    with (
        tcp_server() as loopback,
        tcp_server("0.0.0.0") as anywhere,
        unix_server(host_socket),
        unix_server(f"\0{abstract}".encode(), "abstract"),
    ):
        state = Host(base=base, home=home, workspace=workspace, secret=secret)
        state.values = {
            "home": str(home),
            "ws": str(workspace),
            "secret": secret,
            "host_pid": str(os.getpid()),
            # the start of this process's command line (pytest, or an xdist worker) as the kernel
            # would show the bytes it read
            "host_command": repr(Path("/proc/self/cmdline").read_bytes()[:80])[2:-1],
            "host_init": Path("/proc/1/cmdline").read_bytes().split(b"\0")[0].decode(),
            "tcp_port": str(loopback.sock.getsockname()[1]),
            "tcp_any_port": str(anywhere.sock.getsockname()[1]),
            "host_ip": _host_ip(),
            "host_socket": host_socket,
            "abstract_name": abstract,
            "shm_key": str(shm_key),
            "key_name": f"ipybox-escape-{token}",
            "other_home": str(real_home),
            "other_marker": marker.name,
            "ipykernel_dir": str(Path(ipykernel.__file__).parent),
            "stdlib_dir": str(Path(os.__file__).parent),
        }
        try:
            yield state
        finally:
            for victim in state.victims:
                victim.kill()
                victim.wait()
            marker.unlink(missing_ok=True)
            if shm_id >= 0:
                libc.shmctl(shm_id, 0, None)  # IPC_RMID
            _remove_user_key(key)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def sandboxed(host: Host) -> AsyncIterator[Kernel]:
    policy = SandboxPolicy(home=host.home, allow_read=(host.home,), limits=LIMITS)
    kernel = await start_sandboxed(policy, host.workspace)
    host.values["runtime_parent"] = str(kernel.runtime_dir.parent)
    try:
        yield kernel
    finally:
        await kernel.shutdown(now=True)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def unsandboxed(host: Host) -> AsyncIterator[Kernel]:
    kernel = await Kernel.start(KernelConfig(cwd=host.workspace))
    try:
        yield kernel
    finally:
        await kernel.shutdown(now=True)


async def _attempt(kernel: Kernel, host: Host, attempt: Attempt) -> tuple[bool, str]:
    """Run ``attempt``; return (escaped, explanation) judged from the host's side."""
    token = secrets.token_hex(4)
    victim = host.victim() if attempt.needs_victim else None
    extra = {"token": token, "victim_pid": str(victim.pid) if victim else "0"}
    host.values.setdefault("runtime_parent", str(kernel.runtime_dir.parent))
    env_file = host.workspace / ".env"
    env_before = env_file.read_text() if env_file.exists() else None
    result = await run_attempt(kernel, host.fill(attempt.code, **extra))
    detail = str(result["detail"])
    reasons: list[str] = []
    if attempt.leak is not None and host.fill(attempt.leak, **extra) in detail:
        reasons.append("secret leaked into the result")
    absent = Path(host.fill(attempt.host_absent, **extra)) if attempt.host_absent else None
    if absent is not None and os.path.lexists(absent):
        reasons.append(f"{absent} appeared on the host")
        absent.unlink()
    if victim is not None and victim.poll() is not None:
        reasons.append("the host process was killed")
    if env_before is not None and (not env_file.exists() or env_file.read_text() != env_before):
        reasons.append("the hidden .env file was changed")
        env_file.write_text(env_before)
    if not result["blocked"] and attempt.leak is None and attempt.host_absent is None:
        reasons.append("the attack ran without an error")
    explanation = f"{'; '.join(reasons) or 'blocked'} (kernel saw: {detail})"
    return bool(reasons), explanation


async def _assert_alive_and_clean(kernel: Kernel) -> None:
    output = await kernel.run(
        "import glob, os\n"
        "for p in glob.glob('/tmp/fill-*') + glob.glob('/dev/shm/fill-*') + glob.glob('big-*'):\n"
        "    os.unlink(p)\n"
        "print('alive', 6 * 7)"
    )
    assert output.error is None and "alive 42" in output.text, output


@pytest.mark.parametrize("attempt", ATTEMPTS, ids=[attempt.id for attempt in ATTEMPTS])
async def test_escape_attempt_is_blocked(sandboxed: Kernel, host: Host, attempt: Attempt) -> None:
    escaped, explanation = await _attempt(sandboxed, host, attempt)
    print(explanation)  # shown with -rP: what the kernel got back
    assert not escaped, f"{attempt.id}: ESCAPED: {explanation}"
    if attempt.fills:
        await _assert_alive_and_clean(sandboxed)
        big = list(host.workspace.glob("big-*"))
        assert all(path.stat().st_size <= LIMITS.file_size_mb * 2**20 for path in big)  # type: ignore[operator]


CONTROLS = [attempt for attempt in ATTEMPTS if attempt.control]


@pytest.mark.parametrize("attempt", CONTROLS, ids=[attempt.id for attempt in CONTROLS])
async def test_control_attempt_escapes_without_sandbox(
    unsandboxed: Kernel, host: Host, attempt: Attempt
) -> None:
    escaped, explanation = await _attempt(unsandboxed, host, attempt)
    for leftover in [*host.workspace.glob("key-*"), *Path("/dev/shm").glob("ipybox-pwned-*")]:
        leftover.unlink()
    assert escaped, f"{attempt.id}: the check did not detect the unsandboxed escape: {explanation}"


async def test_host_unaffected_after_the_attempts(sandboxed: Kernel, host: Host) -> None:
    """The host still starts processes; the secrets and the hidden .env are intact."""
    assert subprocess.run(["true"], check=False).returncode == 0
    assert (host.workspace / ".env").read_text() == f"API_KEY={host.secret}\n"
    assert (host.home / ".ssh" / "id_rsa").exists()
    assert not any(Path("/etc").glob("ipybox-*"))
    await _assert_alive_and_clean(sandboxed)
