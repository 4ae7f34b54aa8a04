"""OS sandboxing of the kernel: a policy, a Linux backend (bubblewrap), a macOS backend (Seatbelt).

``sandbox_launcher(policy, workspace=...)`` returns the :class:`~ipybox_core.kernel.launcher.KernelLauncher`
for this platform; ``resolve_sandbox`` turns the executor's ``sandbox=`` argument into a policy.

How the Linux sandbox is built, and why (each point was checked on a root-run Debian 12 VM):

* **The root is an allow-list.** The sandbox's ``/`` is an empty read-only tmpfs; only the system
  directories (``/usr``, ``/etc``, ``/lib*``, ...), the kernel's Python environment (prefixes and
  ``.pth``/``PYTHONPATH`` directories), the workspace, the runtime directory and the policy's extra
  paths are bound into it. Home directories, ``/root``, ``/home``, ``/var``, ``/run``, ``/sys``,
  host sockets are absent by construction, not masked. Secrets inside visible trees are hidden on
  top: the policy's hidden paths, ``.env``-like names in the workspace/extra paths (scanned at each
  launch: files created later are not covered), and, when the application runs as root, every file
  in ``/etc`` other users cannot read (``/etc/shadow``, ``/etc/ssl/private``, ...).
* **An unprivileged uid for a root application.** As root, each kernel runs as its own uid,
  leased from ``SandboxPolicy.sandbox_uid`` (default 1000000000) ... ``+ sandbox_uids - 1``
  (:mod:`._uids`): bubblewrap builds the sandbox as root of a user namespace owned by that uid
  (:mod:`._userns`), and the bootstrap switches to the uid for good, emptying every capability
  set. Root's 0600 files are out of reach and per-user kernel quotas are charged to that uid, not
  to root nor to another kernel. The workspace and ``allow_write`` paths must belong
  to it: an empty directory (such as a workspace ipybox created) is given to it; a directory with
  files of another owner is never given away, and the kernel then stays root in its namespace,
  with a warning. Otherwise (and for non-root callers, whose uid the kernel keeps): no capabilities
  (``--cap-drop ALL``: without it root inside could remount ``/`` writable), ``no_new_privs``, no
  nested user namespaces, the root built from an allow-list, and ``/proc`` read-only (as host root,
  even without capabilities, the sandbox could otherwise write global sysctls such as
  ``kernel.core_pattern``).
* **Namespaces:** user, PID (host processes invisible, ``/proc/<pid>/environ`` unreachable), IPC
  (no host SysV/POSIX IPC), UTS, cgroup and network (only a private loopback; abstract unix
  sockets of the host unreachable). The environment is rebuilt from the launch spec.
* **Limits:** ``setrlimit`` in the kernel process (``MemoryError``, ``File too large``, a CPU-budget
  exception in the cell), size-limited ``/tmp`` and ``/dev/shm``, and cgroups for the whole sandbox
  (pids, memory) where writable; ``RLIMIT_NPROC`` bounds processes for non-root callers (inside the
  user namespace it counts the sandbox's processes only).

* **System calls:** a seccomp filter (:mod:`._seccomp`, built with libseccomp) refuses socket
  families other than unix, IP and netlink-route, ptrace and cross-process memory access, keyrings,
  bpf, userfaultfd, perf events, io_uring, namespaces and mounts, module loading and kexec, and
  foreign ABIs.
* **The host side:** of the kernel's runtime files the sandbox sees its own socket directory
  (writable, fresh per kernel process) and its start files (read-only); its output reaches the host
  through a pipe, its IPython directory lives on the sandbox's own ``/tmp``, and the host reaches its
  sockets through descriptors rather than names (see ``docs/sandbox.md``, threat model).

Not covered: total disk use in the workspace is bounded per file only; the kernel runs as the
application's user (as root: root mapped into a user namespace without capabilities); see
:mod:`ipybox_core.sandbox.macos` for macOS.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path

from ipybox_core._host_process import mark_sandbox_writable
from ipybox_core.errors import SandboxUnavailable
from ipybox_core.kernel.launcher import KernelLauncher
from ipybox_core.sandbox.bwrap import BwrapLauncher
from ipybox_core.sandbox.macos import SeatbeltLauncher, SeatbeltProfile, SrtSettings
from ipybox_core.sandbox.policy import (
    DEFAULT_HIDDEN_NAMES,
    DEFAULT_HIDDEN_PATHS,
    DEFAULT_SYSTEM_PATHS,
    ResourceLimits,
    SandboxPolicy,
    resolve_sandbox,
)
from ipybox_core.sandbox.probe import probe_sandbox

__all__ = [
    "DEFAULT_HIDDEN_NAMES",
    "DEFAULT_HIDDEN_PATHS",
    "DEFAULT_SYSTEM_PATHS",
    "BwrapLauncher",
    "ResourceLimits",
    "SandboxPolicy",
    "SeatbeltLauncher",
    "SeatbeltProfile",
    "SrtSettings",
    "probe_sandbox",
    "resolve_sandbox",
    "sandbox_launcher",
]


def sandbox_launcher(
    policy: SandboxPolicy,
    *,
    workspace: str | os.PathLike[str],
    sockets: Sequence[str | os.PathLike[str]] = (),
) -> KernelLauncher:
    """The launcher that confines kernels by ``policy`` on this platform.

    ``workspace`` is the kernel's read-write directory; ``sockets`` are host unix sockets the kernel
    may connect to outside its runtime directory (e.g. the tool server's ``tools.sock``). Raises
    :class:`~ipybox_core.errors.SandboxUnavailable` (with the reason and the fix) when the sandbox
    cannot run here; ipybox never silently runs the kernel unsandboxed.

    The workspace and ``allow_write`` paths are marked sandbox-writable for the rest of the process
    (:func:`~ipybox_core._host_process.mark_sandbox_writable`): host-side tools neither start in
    nor read from them.
    """
    root = Path(workspace).absolute()
    mark_sandbox_writable(
        [root, *(policy.expand(path, root) for path in policy.allow_write)],
        python_env_read_only=policy.python_env,
    )
    if sys.platform.startswith("linux"):
        return BwrapLauncher(policy, workspace=workspace, sockets=sockets)
    if sys.platform == "darwin":
        return SeatbeltLauncher(policy, workspace=workspace, sockets=sockets)
    probe_sandbox()  # raises: no backend on this platform
    raise SandboxUnavailable(f"no ipybox sandbox backend for {sys.platform}")
