"""The host side of the sandbox boundary: the application never follows what sandboxed code plants.

Each attack runs inside a real bubblewrap sandbox and plants links, FIFOs or files in every
directory the sandbox can write (its socket directory, its IPython directory, the workspace), then
provokes the host path that used to touch them: kernel death, restart after a timeout, reset(),
register_mcp_server, a new executor on the same workspace. Each test also shows its control: the
planted thing is really there and would have done harm had the host followed it by name.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import secrets
import socket
import stat
import tempfile
import time
from pathlib import Path

import pytest
from sandbox_kit import require_bwrap, start_sandboxed, unix_server

from ipybox_core import CodeExecutor, KernelDied
from ipybox_core.kernel._ipc_paths import PinnedSockets, PlantedPath
from ipybox_core.sandbox import ResourceLimits, SandboxPolicy
from ipybox_core.sandbox.policy import DEFAULT_SANDBOX_UID
from prerequisites import require
from servers import PYTHON, SERVE_SCRIPT

pytestmark = [pytest.mark.sandbox]

POLICY = SandboxPolicy(limits=ResourceLimits(max_processes=64))
UID = DEFAULT_SANDBOX_UID
STDIO_SERVER = {"command": PYTHON, "args": [str(SERVE_SCRIPT), "stdio"]}


@pytest.fixture
def secret_file(tmp_path: Path) -> tuple[Path, str]:
    """A root-only host file outside anything the sandbox can see."""
    secret = f"host-secret-{secrets.token_hex(8)}"
    path = tmp_path / "private" / "secret.txt"
    path.parent.mkdir(mode=0o700)
    path.write_text(secret)
    path.chmod(0o600)
    return path, secret


PLANT_EVERYWHERE = """
import os, glob, sys
secret = {secret!r}
planted = []
def plant(path):
    try:
        if os.path.lexists(path) and not os.path.isdir(path):
            os.unlink(path)
        os.symlink(secret, path)
        planted.append(path)
    except OSError:
        pass
ipc_dirs = [d for d in glob.glob({runtime_dir!r} + '/*') if os.path.isdir(d)]
for d in ipc_dirs:
    for name in os.listdir(d):
        plant(os.path.join(d, name))
    for name in ('kernel.log', 'k.log', 'connection.json'):
        plant(os.path.join(d, name))
for name in os.listdir({runtime_dir!r}):
    plant(os.path.join({runtime_dir!r}, name))
for name in ('kernel.log', 'mcptools', '.ipybox-owner'):
    plant(os.path.join(os.getcwd(), name))
try:
    os.mkfifo(os.path.join(os.getcwd(), 'fifo.log'))
    planted.append('fifo')
except OSError:
    pass
for d in ipc_dirs:  # endless and blocking files where the host once read the kernel's log
    for name, target in (('zero.log', '/dev/zero'), ('tty.log', '/dev/tty')):
        try:
            os.symlink(target, os.path.join(d, name))
            planted.append(name)
        except OSError:
            pass
print('planted', len(planted))
"""


async def test_kernel_death_after_planting_links_leaks_nothing(
    tmp_path: Path, secret_file: tuple[Path, str]
) -> None:
    require_bwrap()
    secret_path, secret = secret_file
    workspace = tmp_path / "ws"
    workspace.mkdir()
    kernel = await start_sandboxed(POLICY, workspace)
    try:
        code = PLANT_EVERYWHERE.format(secret=str(secret_path), runtime_dir=str(kernel.runtime_dir))
        output = await kernel.run(code + "sys.stderr.write('last words\\n'); sys.stderr.flush()\n")
        assert output.error is None, output.error
        assert int(output.text.split()[-1]) >= 4
        with pytest.raises(KernelDied) as died:
            await kernel.run("import os; os._exit(0)")
        assert secret not in str(died.value)
        # control: the links are really there, and following one by name would read the secret
        planted = workspace / "kernel.log"
        assert planted.is_symlink() and planted.read_text() == secret
    finally:
        await kernel.shutdown(now=True)


async def test_restart_after_an_ignored_interrupt_writes_nothing_through_planted_links(
    tmp_path: Path, secret_file: tuple[Path, str]
) -> None:
    """The old attack: ignore SIGINT so that the timeout restarts the kernel, which reopened its log."""
    require_bwrap()
    secret_path, _ = secret_file
    target = tmp_path / "host-site" / "evil.pth"
    target.parent.mkdir()
    workspace = tmp_path / "ws"
    workspace.mkdir()
    kernel = await start_sandboxed(POLICY, workspace, interrupt_grace=1.0)
    try:
        code = PLANT_EVERYWHERE.format(secret=str(target), runtime_dir=str(kernel.runtime_dir))
        assert (await kernel.run(code)).error is None
        before = secret_path.read_bytes()
        from ipybox_core.errors import ExecutionTimeout

        with pytest.raises(ExecutionTimeout, match="restarted"):
            await kernel.run(
                "import signal, sys, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\n"
                "sys.stderr.write('import os; os.system(\"touch /tmp/pwned\")\\n')\nwhile True: time.sleep(0.05)",
                timeout=1,
            )
        assert (await kernel.run("print('fresh')")).text == "fresh\n"
        assert not target.exists(), "the host created a file through a planted link"
        assert secret_path.read_bytes() == before
        # control: the link in the workspace points at the target; a naive open(..., "w") creates it
        with open(workspace / "kernel.log", "w") as naive:
            naive.write("x")
        assert target.exists()
    finally:
        await kernel.shutdown(now=True)


async def test_kernel_output_reaches_the_host_bounded_through_its_pipe(tmp_path: Path) -> None:
    require_bwrap()
    workspace = tmp_path / "ws"
    workspace.mkdir()
    kernel = await start_sandboxed(POLICY, workspace)
    try:
        with pytest.raises(KernelDied) as died:
            await kernel.run(
                # ipykernel captures fd 2 and echoes it; write to the process's real stderr directly
                "import os, sys\nfd = getattr(sys.stderr, '_original_stdstream_copy', None) or 2\n"
                "chunk = b'z' * 65536\nfor _ in range(800):\n    os.write(fd, chunk)\n"
                "os.write(fd, b'\\nthe-end-marker\\n')\nos._exit(3)"
            )
        message = str(died.value)
        assert "the-end-marker" in message  # control: the kernel's stderr does reach the host
        assert len(message) < 8000  # 50 MB written, a bounded tail kept
    finally:
        await kernel.shutdown(now=True)


async def test_ipython_startup_code_planted_before_reset_does_not_survive_it(tmp_path: Path) -> None:
    require_bwrap()
    workspace = tmp_path / "ws"
    workspace.mkdir()
    kernel = await start_sandboxed(POLICY, workspace)
    try:
        plant = (
            "import os, subprocess, sys\nfrom IPython.paths import get_ipython_dir\n"
            "d = os.path.join(get_ipython_dir(), 'profile_default', 'startup')\nos.makedirs(d, exist_ok=True)\n"
            "open(os.path.join(d, '00-planted.py'), 'w').write('planted_by_earlier_code = 1\\n')\n"
            "r = subprocess.run([sys.executable, '-m', 'IPython', '--quick', '-c', 'pass'],"
            " capture_output=True, text=True)\n"
            "r = subprocess.run([sys.executable, '-m', 'IPython', '-c', 'print(planted_by_earlier_code)'],"
            " capture_output=True, text=True)\nprint(r.stdout.strip().splitlines()[-1:])\n"
        )
        output = await kernel.run(plant)
        assert output.error is None, output.error
        assert "['1']" in output.text  # control: a new IPython on that directory runs the planted code
        await kernel.restart()
        after = await kernel.run("print('planted_by_earlier_code' in dir())")
        assert after.text.strip() == "False"
    finally:
        await kernel.shutdown(now=True)


async def test_a_planted_mcptools_link_never_makes_the_host_write_elsewhere(tmp_path: Path) -> None:
    require_bwrap()
    workspace = tmp_path / "ws"
    outside = tmp_path / "host-dir"
    outside.mkdir()
    async with CodeExecutor(workspace=workspace, sandbox=True, approval="never") as first:
        await first.register_mcp_server("test", STDIO_SERVER)
        planted = await first.execute(f"import os\nos.symlink({str(outside)!r}, 'mcptools')\nprint('ok')")
        assert planted.text.strip() == "ok"
        assert not first.api_root.is_relative_to(workspace)
    assert (workspace / "mcptools").is_symlink()
    async with CodeExecutor(workspace=workspace, sandbox=True, approval="never") as second:
        await second.register_mcp_server("test", STDIO_SERVER)
        result = await second.execute("from mcptools.test import add\nprint(add(a=1, b=2))")
        assert result.text.strip() == "3", result
        await second.reset()
    assert list(outside.iterdir()) == []
    # control: writing the API where the old default put it follows the link out of the workspace
    (workspace / "mcptools" / "naive.py").write_text("")
    assert (outside / "naive.py").exists()


def test_pinned_kernel_sockets_refuse_links_and_survive_a_swap(tmp_path: Path) -> None:
    ipc_dir = tmp_path / "ipc"
    ipc_dir.mkdir()
    bait_path = str(tmp_path / "bait.sock")
    real_path = ipc_dir / "k-1"
    with unix_server(bait_path, "bait") as bait, unix_server(str(real_path), "kernel") as real:
        link = ipc_dir / "k-2"
        link.symlink_to(bait_path)
        with pytest.raises(PlantedPath, match="symbolic link"):
            PinnedSockets([link])
        fifo = ipc_dir / "k-3"
        os.mkfifo(fifo)
        with pytest.raises(PlantedPath, match="not a socket"):
            PinnedSockets([fifo])
        pinned = PinnedSockets([real_path])
        try:
            # the sandbox swaps the socket for a link to another host socket after the check
            moved = ipc_dir / "moved"
            real_path.rename(moved)
            real_path.symlink_to(bait_path)
            address = pinned.address(real_path).removeprefix("ipc://")
            with socket.socket(socket.AF_UNIX) as client:
                client.connect(address)
                assert client.recv(64) == b"reached:kernel"
            # control: connecting by name now reaches the bait
            with socket.socket(socket.AF_UNIX) as client:
                client.connect(str(real_path))
                assert client.recv(64) == b"reached:bait"
        finally:
            pinned.close()
        assert real.connections == 1 and bait.connections == 1
        assert stat.S_ISSOCK(os.lstat(moved).st_mode)


def files_holding(secret: bytes, roots: list[Path], *, since: float) -> list[Path]:
    """Regular files under ``roots`` written since ``since`` (smaller than 1 MiB) holding ``secret``."""
    found = []
    for root in roots:
        for dirpath, _, filenames in os.walk(root):
            for name in filenames:
                path = Path(dirpath) / name
                try:
                    info = path.lstat()
                    written = stat.S_ISREG(info.st_mode) and info.st_mtime >= since
                    if written and info.st_size < 2**20 and secret in path.read_bytes():
                        found.append(path)
                except OSError:
                    continue
    return sorted(set(found))


async def test_the_tool_server_token_is_never_on_disk(tmp_path: Path) -> None:
    require_bwrap()
    started = time.time() - 2  # a file last written before the executor cannot hold its token
    async with CodeExecutor(workspace=tmp_path / "ws", sandbox=True) as executor:
        token = executor._toolserver.token.encode()  # type: ignore[union-attr]
        assert files_holding(token, [Path("/tmp"), tmp_path], since=started) == []
        # control: the search finds the token where it was written (tmp_path, one of the roots above:
        # walking all of /tmp again, hundreds of thousands of files on a busy machine, proves no more)
        planted = tmp_path / "planted" / "copy.txt"
        planted.parent.mkdir()
        planted.write_bytes(b"token=" + token)
        assert files_holding(token, [tmp_path], since=started) == [planted]
        # control: the token is what the kernel uses, and it does reach the kernel
        seen = await executor.execute("import os\nprint(os.environ['IPYBOX_TOOL_TOKEN'])")
        assert seen.text.strip().encode() == token
        await asyncio.sleep(0)


VSOCK_PROBE = (
    "import socket\ntry:\n    socket.socket(socket.AF_VSOCK, socket.SOCK_STREAM).close()\n    print('created')\n"
    "except OSError as exc:\n    print(type(exc).__name__, exc.errno)\n"
)


async def test_the_sandboxed_kernel_runs_under_the_seccomp_filter(tmp_path: Path) -> None:
    """AF_VSOCK is outside the network namespace: the filter refuses it (EPERM) in the kernel."""
    require_bwrap()
    workspace = tmp_path / "ws"
    workspace.mkdir()
    kernel = await start_sandboxed(POLICY, workspace)
    try:
        assert (await kernel.run(VSOCK_PROBE)).text.strip() == "PermissionError 1"
    finally:
        await kernel.shutdown(now=True)
    # control: the same kernel code without the sandbox gets its vsock socket
    async with CodeExecutor(workspace=workspace, approval="never") as unsandboxed:
        assert (await unsandboxed.execute(VSOCK_PROBE)).text.strip() == "created"


async def test_a_sandboxed_kernel_starts_from_an_interpreter_path_with_dotdot(tmp_path: Path) -> None:
    """The ``..`` climbs through /tmp/pytest-of-..., which the sandbox's private /tmp does not show."""
    require_bwrap()
    import sys

    from ipybox_core.kernel import Kernel, KernelConfig
    from ipybox_core.sandbox import BwrapLauncher

    workspace = tmp_path / "ws"
    workspace.mkdir()
    python = os.path.join(tmp_path, *[".."] * (len(tmp_path.parts) - 1), sys.executable.lstrip("/"))
    assert ".." in python and os.path.samefile(python, sys.executable)
    launcher = BwrapLauncher(POLICY, workspace=workspace)
    kernel = await Kernel.start(KernelConfig(cwd=workspace, launcher=launcher, python=python))
    try:
        assert (await kernel.run("print(1 + 1)")).text == "2\n"
    finally:
        await kernel.shutdown(now=True)
        launcher.close()


APPLICATION = """
import asyncio, json, sys, tempfile
from ipybox_core import CodeExecutor

async def main():
    async with CodeExecutor(workspace=sys.argv[1], sandbox=True, approval="never") as executor:
        await executor.register_mcp_server("test", json.loads(sys.argv[2]))
        await executor.execute("x = 1")
        print(json.dumps({"token": executor._toolserver.token, "kernel": executor._kernel.pid}), flush=True)
        await asyncio.sleep(600)

asyncio.run(main())
"""


def _ipybox_dirs() -> set[Path]:
    return {path for path in Path(tempfile.gettempdir()).glob("ipybox-*") if path.is_dir()}


def _owner(directory: Path) -> int | None:
    try:
        return int((directory / ".ipybox-owner").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _files_holding(token: bytes, roots: set[Path]) -> list[Path]:
    found = []
    for root in roots:
        for dirpath, _, filenames in os.walk(root):
            for name in filenames:
                path = Path(dirpath) / name
                with contextlib.suppress(OSError):
                    if path.is_file() and not path.is_symlink() and token in path.read_bytes():
                        found.append(path)
    return found


async def test_a_killed_application_leaves_nothing_readable_and_the_next_start_sweeps_it(
    tmp_path: Path,
) -> None:
    require_bwrap()
    import json
    import subprocess
    import sys

    before = _ipybox_dirs()
    app = subprocess.Popen(
        [sys.executable, "-c", APPLICATION, str(tmp_path / "ws"), json.dumps(STDIO_SERVER)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        line = await asyncio.wait_for(asyncio.to_thread(app.stdout.readline), 120)  # type: ignore[union-attr]
        started = json.loads(line)
        left = {path for path in _ipybox_dirs() - before if _owner(path) == app.pid}
        assert len(left) >= 3, "the application made its private directories (executor, kernel, launcher)"
    finally:
        app.kill()  # SIGKILL: no cleanup runs
        app.wait()
    # control: a killed application cannot remove its directories (checked at once: another ipybox
    # application on this machine may sweep them any moment)
    leftovers = {path for path in left if path.exists()}
    assert leftovers
    assert _files_holding(started["token"].encode(), leftovers) == []
    for _ in range(100):  # the kernel (--die-with-parent) and the stdio server follow it
        if not Path(f"/proc/{started['kernel']}").exists():
            break
        await asyncio.sleep(0.1)
    assert not Path(f"/proc/{started['kernel']}").exists()
    next_start = (  # the next application: its first kernel start sweeps (once per process)
        "import asyncio, sys\nfrom ipybox_core import CodeExecutor\n"
        "async def main():\n    async with CodeExecutor(workspace=sys.argv[1], sandbox=True):\n        pass\n"
        "asyncio.run(main())\n"
    )
    done = await asyncio.to_thread(
        subprocess.run, [sys.executable, "-c", next_start, str(tmp_path / "ws2")], timeout=120, check=False
    )
    assert done.returncode == 0
    assert {path for path in leftovers if path.exists()} == set()


HOARD_INOTIFY = (
    "import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\nheld = []\n"
    "while len(held) < 4096:\n    fd = libc.inotify_init1(0)\n    if fd < 0:\n        break\n"
    "    held.append(fd)\nprint(len(held), os.strerror(ctypes.get_errno()))\n"
)


def _host_inotify_works() -> bool:
    import ctypes

    fd = ctypes.CDLL(None, use_errno=True).inotify_init1(0)
    if fd < 0:
        return False
    os.close(fd)
    return True


def _python_kernel_uids(kernel_pid: int) -> set[int]:
    """Host uids of the kernel's Python processes (bwrap's own helper stays root, without any
    capability in the host's namespace)."""
    import psutil

    children = psutil.Process(kernel_pid).children(recursive=True)
    kernels = [
        child for child in children if child.name() != "bwrap" and "ipykernel_launcher" in child.cmdline()
    ]
    return {child.uids().real for child in kernels}


async def test_a_root_applications_kernel_runs_as_the_unprivileged_sandbox_uid(tmp_path: Path) -> None:
    require_bwrap()
    require(os.geteuid() == 0, "the uid switch happens when the application runs as root")
    workspace = tmp_path / "empty-ws"
    workspace.mkdir()  # empty: ipybox may give it to the sandbox's uid
    kernel = await start_sandboxed(POLICY, workspace)
    try:
        inside = await kernel.run(
            "import json, os\nopen('made-here', 'w').close()\n"
            "caps = [l.split()[1] for l in open('/proc/self/status') if l.startswith('Cap')]\n"
            "print(json.dumps([os.getresuid(), os.getresgid(), os.getgroups(), caps]))"
        )
        uids, gids, groups, capabilities = json.loads(inside.text)
        uid = kernel.config.launcher.uid  # leased from the policy's range
        assert UID <= uid < UID + POLICY.sandbox_uids
        assert uids == gids == [uid, uid, uid] and groups == []
        assert (
            capabilities == ["0000000000000000"] * 5
        )  # inheritable, permitted, effective, bounding, ambient
        assert kernel.pid is not None and _python_kernel_uids(kernel.pid) == {uid}
        assert (workspace / "made-here").stat().st_uid == uid
    finally:
        await kernel.shutdown(now=True)
    # control: with sandbox_uid=None the kernel stays root (in its namespace)
    control = await start_sandboxed(SandboxPolicy(limits=POLICY.limits, sandbox_uid=None), workspace)
    try:
        assert (await control.run("import os\nprint(os.getuid())")).text.strip() == "0"
    finally:
        await control.shutdown(now=True)


async def test_a_workspace_with_files_of_another_owner_is_never_given_away(tmp_path: Path) -> None:
    require_bwrap()
    require(os.geteuid() == 0, "the uid switch happens when the application runs as root")
    project = tmp_path / "project"
    project.mkdir()
    (project / "notes.txt").write_text("root's")
    kernel = await start_sandboxed(POLICY, project)
    try:
        assert (await kernel.run("import os\nprint(os.getuid())")).text.strip() == "0"
    finally:
        await kernel.shutdown(now=True)
    assert project.stat().st_uid == 0 and (project / "notes.txt").stat().st_uid == 0


async def test_the_sandbox_cannot_use_up_the_root_applications_inotify_quota(tmp_path: Path) -> None:
    """inotify instances are counted per user (128 by default): a root application's sandbox runs
    as its own uid, so hoarding them inside leaves the application's own quota alone."""
    require_bwrap()
    require(os.geteuid() == 0, "the shared per-user quota exists when the application runs as root")
    import subprocess
    import sys

    workspace = tmp_path / "ws"
    workspace.mkdir()
    kernel = await start_sandboxed(POLICY, workspace)
    try:
        hoarded = await kernel.run(HOARD_INOTIFY)
        count, _, reason = hoarded.text.strip().partition(" ")
        assert int(count) >= 100 and reason == "Too many open files", hoarded.text
        assert _host_inotify_works()
    finally:
        await kernel.shutdown(now=True)
    # control: the same hoarding by a process of the application's own user exhausts its quota
    hoarder = subprocess.Popen(
        [sys.executable, "-c", HOARD_INOTIFY + "import sys\nsys.stdin.readline()\n"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        line = await asyncio.wait_for(asyncio.to_thread(hoarder.stdout.readline), 30)  # type: ignore[union-attr]
        assert int(line.split()[0]) >= 1
        assert not _host_inotify_works()
    finally:
        hoarder.kill()
        hoarder.wait()
