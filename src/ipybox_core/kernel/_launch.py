"""Preparing a kernel launch: runtime directory, connection file, bootstrap file, argv, environment."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import secrets
import shutil
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ipybox_core.errors import ConfigError
from ipybox_core.kernel._stale_dirs import mark_owner, sweep_stale_dirs
from ipybox_core.kernel.config import KernelConfig
from ipybox_core.kernel.launcher import KernelLauncher, LaunchSpec

MPL_INLINE_BACKEND = "module://matplotlib_inline.backend_inline"

# Longest unix socket path: sun_path is 108 bytes on Linux, 104 on macOS (with the trailing NUL).
_SUN_PATH_MAX = 103 if sys.platform == "darwin" else 107
# Room after "<runtime dir>/kernel-xxxxxx." for the process number and the socket suffix ("123456-5").
# The tool server's "tools.sock" is shorter than all of it.
_SOCKET_NAME_ROOM = 8
_CHANNEL_PORTS = {"shell_port": 1, "iopub_port": 2, "stdin_port": 3, "control_port": 4, "hb_port": 5}
_HOST_VARIABLES = ("HOME", "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR")
_BOOTSTRAP_SOURCE = Path(__file__).parent.parent / "inkernel" / "_bootstrap.py"
_PRIVATE_DIR_PREFIX = "ipybox-"


@dataclass(frozen=True)
class KernelFiles:
    """What one kernel keeps in its runtime directory; names are unique to the kernel so that
    several kernels (and the tool server's socket) can share a directory.

    The runtime directory is the host's: a sandbox never gets it writable. Each kernel process
    binds its ipc sockets in a directory of its own (:meth:`ipc_dir`), the only runtime path a
    sandbox makes writable; the host never reads or follows anything in it by name (see
    :mod:`ipybox_core.kernel._ipc_paths`).
    """

    runtime_dir: Path
    owns_dir: bool
    """The kernel created the directory (and removes all of it at shutdown)."""
    name: str

    @property
    def connection_file(self) -> Path:
        return self.runtime_dir / f"{self.name}.json"

    def ipc_dir(self, generation: int) -> Path:
        """Where the ``generation``-th kernel process binds its sockets: each process gets a fresh
        directory, so channels to a replaced process never reconnect to its successor."""
        return self.runtime_dir / f"{self.name}.{generation}"

    def socket_base(self, generation: int) -> str:
        return str(self.ipc_dir(generation) / "k")

    def ipython_dir(self, generation: int) -> Path:
        """IPYTHONDIR of an unsandboxed kernel process: fresh for each process (a sandbox gives the
        kernel one in its own private /tmp instead)."""
        return self.runtime_dir / f"{self.name}.{generation}.ipython"

    @property
    def bootstrap(self) -> Path:
        return self.runtime_dir / f"{self.name}_bootstrap.py"

    def remove_process_files(self, generation: int) -> None:
        """Delete what one kernel process used: its socket and IPython directories."""
        for path in (self.ipc_dir(generation), self.ipython_dir(generation)):
            shutil.rmtree(path, ignore_errors=True)  # fd-based: never follows links planted inside

    def remove_start_files(self) -> None:
        """Delete the connection and bootstrap files once the kernel has read them."""
        for path in (self.connection_file, self.bootstrap):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()

    def remove(self) -> None:
        """Delete the directory if the kernel created it, else only the kernel's own files."""
        if self.owns_dir:
            shutil.rmtree(self.runtime_dir, ignore_errors=True)
            return
        for path in self.runtime_dir.glob(f"{self.name}*"):
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path, ignore_errors=True)
            else:
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()


@dataclass(frozen=True)
class ConnectionInfo:
    """Where and how to talk to one kernel incarnation (ipc transport)."""

    ip: str
    """Absolute path prefix of the ipc sockets (``<runtime dir>/kernel-<id>.<n>``, then ``-1`` .. ``-5``)."""
    key: str

    def address(self, channel: str) -> str:
        return f"ipc://{self.ip}-{_CHANNEL_PORTS[channel + '_port']}"

    def socket_path(self, channel: str) -> Path:
        return Path(f"{self.ip}-{_CHANNEL_PORTS[channel + '_port']}")


def prepare_runtime_dir(runtime_dir: Path | None) -> KernelFiles:
    """Use ``runtime_dir`` as is, or create a private (0700) one; check socket path lengths."""
    name = f"kernel-{secrets.token_hex(3)}"
    if runtime_dir is not None:
        path = runtime_dir.absolute()
        if not path.is_dir():
            raise ConfigError(f"the kernel runtime directory {path} does not exist")
        files = KernelFiles(path, owns_dir=False, name=name)
    else:
        parent = Path(tempfile.gettempdir())
        if len(str(parent)) > 40 and Path("/tmp").is_dir():
            parent = Path("/tmp")
        sweep_stale_dirs(parent, _PRIVATE_DIR_PREFIX)
        try:
            path = Path(tempfile.mkdtemp(prefix=_PRIVATE_DIR_PREFIX, dir=parent))
        except OSError as exc:
            raise ConfigError(f"cannot create a kernel runtime directory in {parent}: {exc}") from None
        path.chmod(0o700)
        mark_owner(path)
        files = KernelFiles(path, owns_dir=True, name=name)
    if len(os.fsencode(files.socket_base(0))) + _SOCKET_NAME_ROOM > _SUN_PATH_MAX:
        files.remove()
        raise ConfigError(
            f"the kernel runtime directory {path} is too long for unix socket paths "
            f"(limit {_SUN_PATH_MAX} bytes); use a short one such as /tmp/<name>"
        )
    return files


def write_connection_file(files: KernelFiles, generation: int) -> ConnectionInfo:
    """Write the connection file for the kernel's ``generation``-th process (fresh key, a fresh
    private socket directory)."""
    files.ipc_dir(generation).mkdir(mode=0o700)
    ip = files.socket_base(generation)
    info = ConnectionInfo(ip=ip, key=secrets.token_hex(32))
    content = {
        **_CHANNEL_PORTS,
        "ip": ip,
        "transport": "ipc",
        "key": info.key,
        "signature_scheme": "hmac-sha256",
        "kernel_name": "",
    }
    fd = os.open(files.connection_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w") as file:
        json.dump(content, file)
    return info


def write_bootstrap(files: KernelFiles, config: KernelConfig, cwd: Path) -> Path:
    """The kernel-side start-up file, parameterised for ``config``.

    It runs in the user namespace, so it only defines and deletes one function, which executes the
    bootstrap module's source in a namespace of its own.
    """
    arguments = {
        "workspace": str(cwd) if config.reset_cwd else None,
        "shell_approval": config.shell_approval,
        "output_limit": config.output_limit,
    }
    path = files.bootstrap
    source = (
        "def __ipybox_bootstrap__():\n"
        "    namespace = {'__name__': 'ipybox_kernel_bootstrap'}\n"
        f"    exec(compile({_BOOTSTRAP_SOURCE.read_text()!r}, {str(path)!r}, 'exec'), namespace)\n"
        f"    namespace['bootstrap'](**{arguments!r})\n"
        "__ipybox_bootstrap__()\n"
        "del __ipybox_bootstrap__\n"
    )
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w") as file:
        file.write(source)
    return path


def kernel_argv(config: KernelConfig, connection_file: Path, bootstrap: Path) -> list[str]:
    return [
        config.python,
        "-m",
        "ipykernel_launcher",
        "-f",
        str(connection_file),
        # no sqlite history: faster start, nothing shared between kernels, works on read-only HOME
        "--HistoryManager.enabled=False",
        "--InteractiveShell.colors=nocolor",
        f"--IPKernelApp.exec_files={bootstrap}",
        *config.kernel_args,
    ]


def kernel_environment(
    config: KernelConfig,
    files: KernelFiles,
    generation: int,
    *,
    overrides: Mapping[str, str],
    extra_python_path: Sequence[Path],
) -> dict[str, str]:
    """The kernel's complete environment: a few host variables it needs, then the caller's."""
    host = os.environ
    path = host.get("PATH", os.defpath)
    python_bin = os.path.dirname(config.python)
    if python_bin and python_bin not in path.split(os.pathsep):
        path = python_bin + os.pathsep + path
    env = {"PATH": path}
    env.update({name: host[name] for name in _HOST_VARIABLES if name in host})
    env.setdefault("LANG", "C.UTF-8")
    env["MPLBACKEND"] = MPL_INLINE_BACKEND
    env["IPYTHONDIR"] = str(files.ipython_dir(generation))
    env["PYDEVD_DISABLE_FILE_VALIDATION"] = "1"
    env.update(config.env)
    env.update(overrides)
    python_path = [str(Path(p).absolute()) for p in (*extra_python_path, *config.python_path)]
    if env.get("PYTHONPATH"):
        python_path.append(env["PYTHONPATH"])
    if python_path:
        env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(python_path))
    if config.launcher is None:
        # ipykernel exits when this process goes away (it polls its parent pid).
        env["JPY_PARENT_PID"] = str(os.getpid())
    else:
        # Inside a PID namespace the parent pid never matches: the kernel would kill itself.
        env.pop("JPY_PARENT_PID", None)
    return env


async def wrap_off_loop(launcher: KernelLauncher, spec: LaunchSpec) -> LaunchSpec:
    """``launcher.wrap(spec)`` in a worker thread.

    A sandbox's ``wrap`` scans the workspace for paths to hide, which takes seconds for a workspace
    of a million files: on the event loop that would stall every other kernel and session. If the
    caller is cancelled meanwhile, the wrapped launch is dropped once ready (the descriptors it
    would have passed to the kernel are closed).
    """
    wrapping = asyncio.ensure_future(asyncio.to_thread(launcher.wrap, spec))
    try:
        return await asyncio.shield(wrapping)
    except asyncio.CancelledError:
        wrapping.add_done_callback(lambda done: _close_new_fds(done, spec))
        raise


def _close_new_fds(done: asyncio.Future[LaunchSpec], original: LaunchSpec) -> None:
    if done.cancelled() or done.exception() is not None:
        return
    for fd in set(done.result().pass_fds) - set(original.pass_fds):
        with contextlib.suppress(OSError):
            os.close(fd)
