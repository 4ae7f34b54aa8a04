"""The Linux backend: run the kernel in bubblewrap, confined by a :class:`SandboxPolicy`.

Launch chain (each step ``exec``-s the next, so the process the Kernel started is bwrap's)::

    /bin/sh -c <join cgroups>                                  (host: joins the kernel's cgroups)
      bwrap --args <fd> --seccomp <fd> -- ...                  (namespaces, mounts, --clearenv/--setenv)
        python -c <inkernel/_sandbox_boot.py> <limits> -m ipykernel_launcher -f <connection file>
                                                               (sandbox: setrlimit, SIGXCPU handler)

The bwrap options (including the kernel's environment, which holds the tool server's token) reach
bwrap through an in-memory file on an inherited descriptor: not on the command line, where every
user of the host could read them with ``ps``, and never on disk, where a crash would leave them.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import sys
import tempfile
import threading
import weakref
from collections.abc import Sequence
from pathlib import Path

from ipybox_core.errors import SandboxError, SandboxUnavailable
from ipybox_core.kernel._stale_dirs import mark_owner
from ipybox_core.kernel.launcher import InterruptMode, LaunchSpec
from ipybox_core.sandbox._cgroups import KernelCgroups, available_controllers, create_cgroups
from ipybox_core.sandbox._command import boot_command, module_index, sandbox_environment
from ipybox_core.sandbox._mounts import FilesystemPlan, plan_filesystem
from ipybox_core.sandbox._ownership import give_directory
from ipybox_core.sandbox._proxy import FilteringProxy, HostFilter
from ipybox_core.sandbox._scan import FileId
from ipybox_core.sandbox._seccomp import seccomp_program
from ipybox_core.sandbox._uids import UidLease, in_range, lease_uid
from ipybox_core.sandbox._userns import mapped_user_namespace
from ipybox_core.sandbox.policy import SandboxPolicy
from ipybox_core.sandbox.probe import find_bwrap, probe_sandbox

logger = logging.getLogger(__name__)

PROXY_PORT = 3128
"""Port of the in-sandbox forwarder to the filtering proxy (``HTTP(S)_PROXY``), on the sandbox's loopback."""
PROXY_SOCKET = Path("/tmp/.ipybox-proxy.sock")
"""Where the host proxy's socket appears inside the sandbox (a mount point: it cannot be replaced)."""

_LAUNCH_SCRIPT = """\
while [ "$1" != -- ]; do
  echo $$ > "$1" || { echo "ipybox sandbox: cannot join the cgroup $1" >&2; exit 125; }
  shift
done
shift
exec "$@"
"""
SANDBOX_IPYTHON_DIR = "/tmp/.ipython"
"""IPYTHONDIR inside the sandbox: on its private, size-limited /tmp, new for every kernel process."""


class BwrapLauncher:
    """A :class:`~ipybox_core.kernel.launcher.KernelLauncher` running kernels in bubblewrap.

    ``workspace`` is the kernel's read-write directory; ``sockets`` are host unix sockets the kernel
    may connect to although they lie outside its visible paths (the tool server's socket), each
    shown at its path as a read-only mount point that the sandbox cannot replace. The constructor
    probes the sandbox (cached per process) and raises :class:`SandboxUnavailable` when it cannot
    run here, or when a resource limit cannot be enforced (a process limit as root without a
    writable pids cgroup).
    """

    def __init__(
        self,
        policy: SandboxPolicy,
        *,
        workspace: str | os.PathLike[str],
        sockets: Sequence[str | os.PathLike[str]] = (),
        bwrap: str | None = None,
        probe: bool = True,
    ) -> None:
        if probe:
            probe_sandbox(bwrap=bwrap)
        self.policy = policy
        self.workspace = Path(workspace).absolute()
        self.sockets = tuple(Path(path).absolute() for path in sockets)
        self.bwrap = find_bwrap(bwrap)
        if not self.workspace.is_dir():
            raise SandboxError(f"the workspace {self.workspace} is not a directory")
        if (
            policy.limits.max_processes is not None
            and os.geteuid() == 0
            and "pids" not in available_controllers()
        ):
            raise SandboxUnavailable(
                "cannot bound the sandbox's process count: the application runs as root (RLIMIT_NPROC "
                "does not apply to root) and no writable pids cgroup is available. Run ipybox as a "
                "non-root user, give it a cgroup it may write (cgroup v1 pids hierarchy, or a cgroup v2 "
                "directory with the pids controller delegated), or accept no process limit with "
                "ResourceLimits(max_processes=None)."
            )
        writable = [self.workspace, *(policy.expand(path, self.workspace) for path in policy.allow_write)]
        self._uid_lease = _unprivileged_uid(policy, writable)
        self.uid = self._uid_lease.uid if self._uid_lease is not None else None
        """The host uid the kernel runs as when the application is root (see :mod:`._userns`; one
        of the policy's range, leased by this launcher: :mod:`._uids`), or None: the kernel is the
        application's user (as root: root in a user namespace)."""
        self._userns = mapped_user_namespace(self.uid) if self.uid is not None else None
        self._private = Path(tempfile.mkdtemp(prefix="ipybox-launch-"))
        mark_owner(self._private)
        self._deny_file = self._private / "denied"
        self._deny_file.touch(mode=0o000)
        os.chmod(self._deny_file, 0o000)
        self._proxies: dict[Path, FilteringProxy] = {}
        self._hidden_ids: frozenset[FileId] = frozenset()
        """Identities hidden at this launcher's earlier launches: hidden again wherever they are
        (a renamed directory, a re-pointed link), never given back to the sandbox."""
        self._hidden_lock = threading.Lock()
        self._finalizer = weakref.finalize(self, _release, self._private, self._proxies, self._uid_lease)

    @property
    def interrupt_mode(self) -> InterruptMode:
        """Always ``"message"``: a SIGINT to bwrap's process group would end the sandbox."""
        return "message"

    def close(self) -> None:
        """Remove the launcher's private files (kernels it started cannot be restarted afterwards)."""
        self._finalizer()

    def plan(self, spec: LaunchSpec) -> FilesystemPlan:
        """The sandbox's file system for ``spec`` (what :meth:`wrap` mounts).

        Scans the workspace and the allowed trees (see :mod:`._scan`): blocking, seconds for a big
        workspace; a kernel calls :meth:`wrap` in a worker thread.
        """
        interpreters = [] if module_index(spec.argv) is not None else [Path(sys.executable)]
        with self._hidden_lock:
            known = self._hidden_ids
        plan = plan_filesystem(
            self.policy,
            workspace=self.workspace,
            spec=spec,
            interpreters=interpreters,
            sockets=self.sockets,
            known_hidden=known,
        )
        with self._hidden_lock:
            self._hidden_ids |= plan.hidden_ids
        return plan

    def wrap(self, spec: LaunchSpec) -> LaunchSpec:
        """Return the launch of ``spec`` inside bubblewrap (see the module docstring).

        Blocking (the file-system plan scans the user trees): call it off the event loop.
        """
        if not self._private.is_dir():
            raise SandboxError("this BwrapLauncher was closed")
        plan = self.plan(spec)
        if plan.is_visible(self._private):
            raise SandboxError(
                f"the launcher's private directory {self._private} would be visible in the sandbox; "
                "set TMPDIR outside the workspace and the allowed paths"
            )
        cgroups = self._cgroups(spec.runtime_dir)
        sockets: list[tuple[Path, Path]] = []
        proxy: tuple[int, str] | None = None
        if self.policy.allow_hosts:
            sockets.append((self._proxy_socket(spec.runtime_dir), PROXY_SOCKET))
            proxy = (PROXY_PORT, str(PROXY_SOCKET))
        if self.uid is not None:
            self._open_to_kernel(spec, [*self.sockets, *(source for source, _ in sockets)])
        userns_fd = os.dup(self._userns) if self._userns is not None else None
        options = [
            *self._namespace_options(userns_fd),
            *plan.bwrap_args(self._deny_file, sockets, unprivileged=self.uid is not None),
            *([] if self.uid is not None else ["--chdir", str(spec.cwd.absolute())]),  # else: the boot
            "--clearenv",
        ]
        environment = sandbox_environment(
            spec.env,
            home=str(plan.home),
            tmp="/tmp",
            backend="bwrap",
            proxy_url=f"http://127.0.0.1:{PROXY_PORT}" if proxy else None,
        )
        environment["IPYTHONDIR"] = SANDBOX_IPYTHON_DIR
        for key, value in environment.items():
            options += ["--setenv", key, value]
        shared_quotas = os.geteuid() == 0 and self.uid is None
        extra_fds = [] if userns_fd is None else [userns_fd]
        try:
            extra_fds.append(_memory_file("ipybox-seccomp", seccomp_program(as_root=shared_quotas)))
            options += ["--seccomp", str(extra_fds[-1])]
            options_fd = _memory_file("ipybox-bwrap-options", b"".join(o.encode() + b"\0" for o in options))
        except BaseException:
            for fd in extra_fds:
                os.close(fd)
            raise
        user = (self.uid, str(plan.home), str(spec.cwd.absolute())) if self.uid is not None else None
        argv = [
            "/bin/sh",
            "-c",
            _LAUNCH_SCRIPT,
            "ipybox-sandbox",
            *(str(path) for path in cgroups.procs_files),
            "--",
            self.bwrap,
            "--args",
            str(options_fd),
            "--",
            # Inside the user namespace RLIMIT_NPROC counts the sandbox's processes only, but root
            # is exempt from it: as root the pids cgroup bounds the process count.
            *boot_command(spec, self.policy.limits, process_limit=os.geteuid() != 0, proxy=proxy, user=user),
        ]
        return LaunchSpec(
            argv=argv,
            env={"PATH": os.defpath},
            cwd=spec.cwd,
            runtime_dir=spec.runtime_dir,
            ipc_dir=spec.ipc_dir,
            kernel_files=spec.kernel_files,
            pass_fds=(*spec.pass_fds, options_fd, *extra_fds),
        )

    def _open_to_kernel(self, spec: LaunchSpec, sockets: Sequence[Path]) -> None:
        """What the unprivileged kernel must reach of the host's own files: its socket directory,
        its start files (in the host-only runtime directory) and the sockets passed to it."""
        assert self.uid is not None
        if spec.ipc_dir is not None:
            os.chown(spec.ipc_dir, self.uid, self.uid, follow_symlinks=False)
        for path in spec.kernel_files:
            os.chmod(path, 0o644, follow_symlinks=False)  # the runtime directory itself stays 0700
        for path in sockets:
            os.chown(path, self.uid, self.uid, follow_symlinks=False)

    def _namespace_options(self, userns_fd: int | None) -> list[str]:
        if userns_fd is None:
            user = ["--unshare-user", "--disable-userns", "--cap-drop", "ALL"]
        else:
            # Built as root of a namespace in which the kernel's uid exists; the bootstrap switches
            # to that uid (which clears these capabilities as well) before anything else runs.
            user = ["--userns", str(userns_fd), "--cap-drop", "ALL"]
            user += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID", "--cap-add", "CAP_SETPCAP"]
        options = [
            "--die-with-parent",
            "--new-session",
            *user,
            "--unshare-pid",
            "--unshare-ipc",
            "--unshare-uts",
            "--unshare-cgroup-try",
            "--hostname",
            "ipybox",
        ]
        if not self.policy.network:
            options.append("--unshare-net")
        return options

    def _proxy_socket(self, runtime_dir: Path) -> Path:
        """The host socket of the kernel's filtering proxy (started once per runtime directory)."""
        proxy = self._proxies.get(runtime_dir)
        if proxy is None or not proxy.running:
            proxy = FilteringProxy(
                HostFilter(self.policy.allow_hosts),
                unix_path=self._private / f"{_key(runtime_dir)}.proxy",
                alive=runtime_dir.exists,
            )
            self._proxies[runtime_dir] = proxy
        assert proxy.unix_path is not None
        return proxy.unix_path

    def _cgroups(self, runtime_dir: Path) -> KernelCgroups:
        limits = self.policy.limits
        total = limits.effective_total_memory_mb
        return create_cgroups(
            runtime_dir,
            memory_bytes=total * 2**20 if total else None,
            max_pids=limits.max_processes,
        )


def _unprivileged_uid(policy: SandboxPolicy, writable: Sequence[Path]) -> UidLease | None:
    """A uid of the policy's range if the application is root and every writable tree can be given
    to it without taking anything from anyone: it already owns it, or the tree is an empty directory
    (such as the workspace ipybox just created). A tree owned by a uid of the range (a restart, a
    kept workspace) decides the uid; otherwise a free one is leased. A directory holding files of
    another owner (a project, a home) is never given away: the kernel then stays root in its
    namespace."""
    base, count = policy.sandbox_uid, policy.sandbox_uids
    if os.geteuid() != 0 or base is None:
        return None
    owners = set()
    for tree in writable:
        info = tree.stat()
        if in_range(info.st_uid, base, count):
            owners.add(info.st_uid)
        elif any(tree.iterdir()):
            logger.warning(
                "the sandbox runs as root in a user namespace, not as uid %d: %s belongs to uid %d and "
                "is not empty (give it to uid %d to run the kernel unprivileged)",
                base,
                tree,
                info.st_uid,
                base,
            )
            return None
    if len(owners) > 1:
        logger.warning(
            "the sandbox runs as root in a user namespace: its writable paths belong to different "
            "sandbox uids (%s)",
            ", ".join(map(str, sorted(owners))),
        )
        return None
    lease = lease_uid(base, count, owner=owners.pop() if owners else None)
    for tree in writable:
        if tree.stat().st_uid != lease.uid:
            give_directory(tree, lease.uid)  # empty: nothing of anyone else changes owner
    return lease


def _memory_file(name: str, data: bytes) -> int:
    """A descriptor of an anonymous in-memory file holding ``data``, positioned at its start."""
    fd = os.memfd_create(name)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.lseek(fd, 0, os.SEEK_SET)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _key(runtime_dir: Path) -> str:
    return hashlib.sha256(str(runtime_dir.absolute()).encode()).hexdigest()[:16]


def _release(private: Path, proxies: dict[Path, FilteringProxy], uid_lease: UidLease | None) -> None:
    for proxy in proxies.values():
        proxy.close()
    proxies.clear()
    shutil.rmtree(private, ignore_errors=True)
    if uid_lease is not None:
        uid_lease.release()
