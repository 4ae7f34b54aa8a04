"""Reaching a kernel's ipc sockets without following a name the kernel controls.

A kernel binds its sockets in a directory it can write (inside a sandbox: the only host directory
of the runtime that it can write). Connecting by path would follow whatever the kernel put there
since: a symlink to another unix socket of the host, say. So the host opens each socket once with
``O_PATH | O_NOFOLLOW``, checks that it is a socket, and connects through ``/proc/self/fd/<n>``,
which names that very inode however the directory changes afterwards. The descriptors stay open
while the channels live (zmq reconnects through the same names).

Elsewhere than Linux there is no such /proc: the path is used as is (no sandbox backend there
gives the kernel a directory the host reads).
"""

from __future__ import annotations

import contextlib
import os
import stat
import sys
from collections.abc import Sequence
from pathlib import Path

_PROC_FD = Path("/proc/self/fd")


class SocketNotReady(Exception):
    """A kernel socket does not exist (yet)."""


class PlantedPath(Exception):
    """Something other than a socket stands where the kernel's socket belongs."""


class PinnedSockets:
    """Descriptors of a kernel's sockets, opened once; :meth:`address` names them for zmq."""

    def __init__(self, paths: Sequence[Path]) -> None:
        self._fds: dict[Path, int] = {}
        try:
            for path in paths:
                fd = _open_socket(path)
                if fd >= 0:
                    self._fds[path] = fd
        except BaseException:
            self.close()
            raise

    def address(self, path: Path) -> str:
        """The zmq ``ipc://`` address that reaches the socket opened for ``path``."""
        fd = self._fds.get(path)
        if fd is None:
            return f"ipc://{path}"
        return f"ipc://{_PROC_FD / str(fd)}"

    def close(self) -> None:
        """Close the descriptors (after the channels using them)."""
        fds, self._fds = self._fds, {}
        for fd in fds.values():
            with contextlib.suppress(OSError):
                os.close(fd)


def _open_socket(path: Path) -> int:
    if not sys.platform.startswith("linux"):
        return -1
    try:
        fd = os.open(path, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        raise SocketNotReady(str(path)) from None
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        os.close(fd)
        raise
    if not stat.S_ISSOCK(mode):
        os.close(fd)
        if stat.S_ISLNK(mode):
            raise PlantedPath(f"{path} is a symbolic link, not the kernel's socket")
        raise PlantedPath(f"{path} is not a socket")
    return fd


def sockets_ready(paths: Sequence[Path]) -> bool:
    """Whether every path exists (``lstat``; nothing is followed or opened)."""
    for path in paths:
        try:
            os.lstat(path)
        except FileNotFoundError:
            return False
    return True
