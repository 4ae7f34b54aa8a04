"""The Linux backend: run the kernel in bubblewrap, confined by a :class:`SandboxPolicy`.

Launch chain (all ``exec``, so the kernel's process is the one jupyter_client started)::

    /bin/sh -c <join cgroups; open the options file on fd 3>   (host: joins the kernel's cgroups)
      bwrap --args 3 -- ...                                    (namespaces, mounts, --clearenv/--setenv)
        python -c <_boot.py> <limits> -m ipykernel_launcher -f <connection file>
                                                               (sandbox: setrlimit, SIGXCPU handler)

The bwrap options (including the kernel's environment, which may hold the tool server's token)
live in a file in a launcher-private directory instead of on the command line, where every user
of the host could read them with ``ps``; the sandbox cannot see or change that file.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import shutil
import sys
import tempfile
import weakref
from collections.abc import Mapping, Sequence
from pathlib import Path

from ipybox_core.errors import SandboxError, SandboxUnavailable
from ipybox_core.kernel.launcher import InterruptMode, LaunchSpec
from ipybox_core.sandbox import _boot
from ipybox_core.sandbox._cgroups import KernelCgroups, available_controllers, create_cgroups
from ipybox_core.sandbox._mounts import FilesystemPlan, plan_filesystem
from ipybox_core.sandbox._pyenv import find_executable
from ipybox_core.sandbox.policy import SandboxPolicy
from ipybox_core.sandbox.probe import find_bwrap, probe_sandbox

DROPPED_ENV = frozenset(
    {
        "JPY_PARENT_PID",  # ipykernel would poll a parent pid that the PID namespace hides, and exit
        "JPY_INTERRUPT_EVENT",
        "IPY_INTERRUPT_EVENT",
        "SSH_AUTH_SOCK",
        "SSH_AGENT_PID",
        "DBUS_SESSION_BUS_ADDRESS",
        "XDG_RUNTIME_DIR",
        "DISPLAY",
        "WAYLAND_DISPLAY",
        "TMP",
        "TEMP",
    }
)
"""Variables never passed into the sandbox: pointers to host services and parent-process plumbing."""

_LAUNCH_SCRIPT = """\
options=$1; shift
while [ "$1" != -- ]; do
  echo $$ > "$1" || { echo "ipybox sandbox: cannot join the cgroup $1" >&2; exit 125; }
  shift
done
shift
exec 3< "$options" || exit 125
exec "$@"
"""
_PYTHON_NAME = re.compile(r"^python(\d+(\.\d+)?)?$")
_OPTIONS_WITH_VALUE = frozenset({"-X", "-W"})


class BwrapLauncher:
    """A :class:`~ipybox_core.kernel.launcher.KernelLauncher` running kernels in bubblewrap.

    ``workspace`` is the kernel's read-write directory. The constructor probes the sandbox (cached
    per process) and raises :class:`SandboxUnavailable` when it cannot run here, or when a resource
    limit cannot be enforced (a process limit as root without a writable pids cgroup).
    """

    def __init__(
        self,
        policy: SandboxPolicy,
        *,
        workspace: str | os.PathLike[str],
        bwrap: str | None = None,
        probe: bool = True,
    ) -> None:
        if probe:
            probe_sandbox(bwrap=bwrap)
        self.policy = policy
        self.workspace = Path(workspace).absolute()
        self.bwrap = find_bwrap(bwrap)
        if not self.workspace.is_dir():
            raise SandboxError(f"the workspace {self.workspace} is not a directory")
        limits = policy.limits
        self._cgroup_controllers = available_controllers()
        if limits.max_processes is not None and os.geteuid() == 0 and "pids" not in self._cgroup_controllers:
            raise SandboxUnavailable(
                "cannot bound the sandbox's process count: the application runs as root (RLIMIT_NPROC "
                "does not apply to root) and no writable pids cgroup is available. Run ipybox as a "
                "non-root user, give it a cgroup it may write (cgroup v1 pids hierarchy, or a cgroup v2 "
                "directory with the pids controller delegated), or accept no process limit with "
                "ResourceLimits(max_processes=None)."
            )
        self._private = Path(tempfile.mkdtemp(prefix="ipybox-launch-"))
        self._deny_file = self._private / "denied"
        self._deny_file.touch(mode=0o000)
        os.chmod(self._deny_file, 0o000)
        self._finalizer = weakref.finalize(self, shutil.rmtree, self._private, True)

    @property
    def interrupt_mode(self) -> InterruptMode:
        """Always ``"message"``: a SIGINT to bwrap's process group would end the sandbox."""
        return "message"

    def close(self) -> None:
        """Remove the launcher's private files (kernels it started cannot be restarted afterwards)."""
        self._finalizer()

    def plan(self, spec: LaunchSpec) -> FilesystemPlan:
        """The sandbox's file system for ``spec`` (what :meth:`wrap` mounts)."""
        interpreters = [] if self._runs_in_process(spec) else [Path(sys.executable)]
        return plan_filesystem(self.policy, workspace=self.workspace, spec=spec, interpreters=interpreters)

    def wrap(self, spec: LaunchSpec) -> LaunchSpec:
        """Return the launch of ``spec`` inside bubblewrap (see the module docstring)."""
        if not self._private.is_dir():
            raise SandboxError("this BwrapLauncher was closed")
        plan = self.plan(spec)
        if plan.is_visible(self._private):
            raise SandboxError(
                f"the launcher's private directory {self._private} would be visible in the sandbox; "
                "set TMPDIR outside the workspace and the allowed paths"
            )
        cgroups = self._cgroups(spec.runtime_dir)
        options = [
            *self._namespace_options(),
            *plan.bwrap_args(self._deny_file),
            "--chdir",
            str(spec.cwd.absolute()),
            "--clearenv",
        ]
        for key, value in self._environment(spec.env, plan).items():
            options += ["--setenv", key, value]
        options_file = self._write_options(spec.runtime_dir, options)
        argv = [
            "/bin/sh",
            "-c",
            _LAUNCH_SCRIPT,
            "ipybox-sandbox",
            str(options_file),
            *(str(path) for path in cgroups.procs_files),
            "--",
            self.bwrap,
            "--args",
            "3",
            "--",
            *self._kernel_command(spec),
        ]
        return LaunchSpec(argv=argv, env={"PATH": os.defpath}, cwd=spec.cwd, runtime_dir=spec.runtime_dir)

    def _namespace_options(self) -> list[str]:
        options = [
            "--die-with-parent",
            "--new-session",
            "--unshare-user",
            "--unshare-pid",
            "--unshare-ipc",
            "--unshare-uts",
            "--unshare-cgroup-try",
            "--disable-userns",
            "--cap-drop",
            "ALL",
            "--hostname",
            "ipybox",
        ]
        if not self.policy.network:
            options.append("--unshare-net")
        return options

    def _environment(self, env: Mapping[str, str], plan: FilesystemPlan) -> dict[str, str]:
        inside = {key: value for key, value in env.items() if key not in DROPPED_ENV}
        inside["HOME"] = str(plan.home)
        inside["TMPDIR"] = "/tmp"
        inside["IPYBOX_SANDBOX"] = "bwrap"
        return inside

    def _cgroups(self, runtime_dir: Path) -> KernelCgroups:
        limits = self.policy.limits
        total = limits.effective_total_memory_mb
        return create_cgroups(
            runtime_dir,
            memory_bytes=total * 2**20 if total else None,
            max_pids=limits.max_processes,
        )

    def _rlimits(self) -> dict[str, list[int]]:
        limits = self.policy.limits
        rlimits: dict[str, list[int]] = {}
        if limits.memory_mb is not None:
            rlimits["RLIMIT_DATA"] = [limits.memory_mb * 2**20] * 2
        if limits.cpu_seconds is not None:
            rlimits["RLIMIT_CPU"] = [limits.cpu_seconds, limits.cpu_seconds + limits.cpu_grace_seconds]
        if limits.open_files is not None:
            rlimits["RLIMIT_NOFILE"] = [limits.open_files] * 2
        if limits.file_size_mb is not None:
            rlimits["RLIMIT_FSIZE"] = [limits.file_size_mb * 2**20] * 2
        if limits.max_processes is not None and os.geteuid() != 0:
            # Inside the sandbox's user namespace RLIMIT_NPROC counts the sandbox's processes only.
            rlimits["RLIMIT_NPROC"] = [limits.max_processes] * 2
        return rlimits

    def _kernel_command(self, spec: LaunchSpec) -> list[str]:
        limits = self.policy.limits
        config = json.dumps(
            {
                "rlimits": self._rlimits(),
                "cpu_seconds": limits.cpu_seconds,
                "cpu_grace_seconds": limits.cpu_grace_seconds,
            },
            separators=(",", ":"),
        )
        boot = _boot_source()
        argv = list(spec.argv)
        module_at = self._module_index(argv)
        if module_at is not None:
            return [argv[0], *argv[1:module_at], "-c", boot, config, *argv[module_at:]]
        program = find_executable(argv[0], spec.env)
        if program is None:
            raise SandboxError(f"cannot find the kernel program {argv[0]!r} on the launch PATH")
        return [sys.executable, "-c", boot, config, "--exec", str(program), *argv[1:]]

    def _runs_in_process(self, spec: LaunchSpec) -> bool:
        return self._module_index(list(spec.argv)) is not None

    @staticmethod
    def _module_index(argv: Sequence[str]) -> int | None:
        """Index of ``-m`` when ``argv`` is ``python [options] -m module ...``, else ``None``."""
        if not argv or not _PYTHON_NAME.match(Path(argv[0]).name):
            return None
        i = 1
        while i < len(argv):
            arg = argv[i]
            if arg == "-m":
                return i if i + 1 < len(argv) else None
            if arg in _OPTIONS_WITH_VALUE:
                i += 2
            elif arg.startswith("-") and arg not in ("-c", "-", "--"):
                i += 1
            else:
                return None
        return None

    def _write_options(self, runtime_dir: Path, options: list[str]) -> Path:
        name = hashlib.sha256(str(runtime_dir.absolute()).encode()).hexdigest()[:16]
        path = self._private / f"{name}.args"
        data = b"".join(option.encode() + b"\0" for option in options)
        with os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb") as file:
            file.write(data)
        return path


@functools.cache
def _boot_source() -> str:
    return Path(_boot.__file__).read_text(encoding="utf-8")
