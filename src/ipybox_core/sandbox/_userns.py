"""A user namespace in which an unprivileged host uid exists, for sandboxes started by root.

bubblewrap run by root with ``--unshare-user`` maps the sandbox to host root: per-user kernel
quotas (inotify instances, pending signals, message queues, ...) are then shared with the root
application. Dropping to an unprivileged uid *before* bubblewrap does not work either: bubblewrap
must bind the Python environment, which often lies where that uid cannot go (``/root/.pyenv``).

So a helper running as ``uid`` creates a user namespace (its owner is then ``uid``: the kernel
charges per-user quotas of everything inside to the owner, not to root), root maps ``0 -> 0`` and
``uid -> uid`` (``gid`` likewise) into it, once per process, and bubblewrap joins it (``--userns
FD``): it builds the sandbox as root of that namespace, and the sandbox's first program
(``inkernel/_sandbox_boot.py``) then switches to ``uid`` for good, which clears every
capability. The namespace lives as long as a descriptor of it is open.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading

from ipybox_core._host_process import host_cwd, isolated_python
from ipybox_core.errors import SandboxUnavailable

_HELPER = r"""
import ctypes, os, sys
uid = int(sys.argv[1])
os.setgroups([])
os.setresgid(uid, uid, uid)
os.setresuid(uid, uid, uid)  # the namespace's owner: quotas of what runs inside are charged to uid
if ctypes.CDLL(None, use_errno=True).unshare(0x10000000) != 0:  # CLONE_NEWUSER
    sys.exit("unshare(CLONE_NEWUSER) failed: " + os.strerror(ctypes.get_errno()))
print(os.getpid(), flush=True)
sys.stdin.readline()
"""

_lock = threading.Lock()
_namespaces: dict[int, int] = {}


def mapped_user_namespace(uid: int) -> int:
    """A descriptor of the namespace mapping root and ``uid`` (made once per process and uid).

    The caller must not close it; pass ``os.dup()`` of it to a child that closes its copy.
    """
    with _lock:
        fd = _namespaces.get(uid)
        if fd is None:
            fd = _namespaces[uid] = _create(uid)
        return fd


def _create(uid: int) -> int:
    if os.geteuid() != 0:
        raise SandboxUnavailable("only root can map another user into a user namespace")
    helper = subprocess.Popen(
        isolated_python(sys.executable, "-S", "-c", _HELPER, str(uid)),
        cwd=host_cwd(),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={},
    )
    assert helper.stdin is not None
    assert helper.stdout is not None
    try:
        line = helper.stdout.readline()
        if not line.strip().isdigit():
            helper.wait(5)
            error = helper.stderr.read().strip() if helper.stderr else ""
            raise SandboxUnavailable(f"cannot create a user namespace for the sandbox's uid: {error or line}")
        pid = int(line)
        mapping = f"0 0 1\n{uid} {uid} 1\n"
        try:
            for name in ("uid_map", "gid_map"):
                with open(f"/proc/{pid}/{name}", "w") as file:
                    file.write(mapping)
            return os.open(f"/proc/{pid}/ns/user", os.O_RDONLY | os.O_CLOEXEC)
        except OSError as exc:
            raise SandboxUnavailable(
                f"cannot map uid {uid} into the sandbox's user namespace: {exc}"
            ) from None
    finally:
        helper.stdin.close()
        try:
            helper.wait(5)
        except subprocess.TimeoutExpired:
            helper.kill()
            helper.wait()
