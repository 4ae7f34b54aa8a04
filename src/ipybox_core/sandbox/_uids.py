"""Which unprivileged uid a root application's sandboxed kernel runs as: one per kernel, from a range.

Per-user kernel quotas (inotify instances, pending signals, message queues, ...) are charged to the
uid a process runs as. Kernels sharing a uid share them: one conversation could take every inotify
instance from the others. So each sandbox *leases* a uid of ``SandboxPolicy.sandbox_uid ...
sandbox_uid + sandbox_uids - 1`` that no other live sandbox on this host holds, and returns it when
its launcher is closed.

A lease is held in this process (a count per uid: a kernel relaunched after its workspace was
renamed takes the same uid again) and across processes by an exclusive ``flock`` on
``<uid>`` in a root-only directory (:data:`LEASE_DIRS`): a lock dies with its process, so a killed
application frees its uids. When every uid of the range is taken, the kernel *shares* one (the one
this process leases least, or the range's first) and a warning says so: quotas are then shared by
those kernels, nothing else is (each sees only its own files).
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import stat
import tempfile
import threading
import weakref
from dataclasses import dataclass
from pathlib import Path

logger = logging.getLogger(__name__)

LEASE_DIRS = (Path("/run"), Path(tempfile.gettempdir()))
"""Where the root-only ``ipybox-sandbox-uids`` lock directory is made (the first that exists)."""
_LEASE_DIR_NAME = "ipybox-sandbox-uids"
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_LOCK_FLAGS = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC

_lock = threading.Lock()
_held: dict[int, _Held] = {}  # uid -> this process's lease of it
_lease_dir: int | None = None  # descriptor of the lock directory (-1: none usable)
_warned: set[tuple[int, int]] = set()


@dataclass
class _Held:
    users: int
    lock_fd: int | None  # the flock (None: shared, or no lock directory)


class UidLease:
    """One kernel's hold on a sandbox uid; :meth:`release` (or garbage collection) gives it back."""

    def __init__(self, uid: int, *, shared: bool) -> None:
        self.uid = uid
        self.shared = shared
        """True when the range was exhausted and the uid is shared with other kernels."""
        self._finalizer = weakref.finalize(self, _release, uid)

    def release(self) -> None:
        """Give the uid back (idempotent)."""
        self._finalizer()

    def __repr__(self) -> str:
        return f"UidLease(uid={self.uid}, shared={self.shared})"


def in_range(uid: int, base: int, count: int) -> bool:
    """Whether ``uid`` is one of ``base ... base + count - 1``."""
    return base <= uid < base + count


def lease_uid(base: int, count: int, *, owner: int | None = None) -> UidLease:
    """A lease of a uid of ``base ... base + count - 1`` no other live sandbox holds.

    ``owner``: the uid that already owns the kernel's writable trees (a relaunch, a kept
    workspace); it is taken whether or not someone else holds it (the files are its own).
    """
    with _lock:
        if owner is not None:
            return _take(owner)
        for uid in range(base, base + count):  # the lowest free: few user namespaces to make
            if uid in _held:
                continue
            free, lock_fd = _try_lock(uid)
            if free:
                _held[uid] = _Held(1, lock_fd)
                return UidLease(uid, shared=False)
        uid = min(
            (uid for uid in _held if in_range(uid, base, count)), key=lambda u: _held[u].users, default=base
        )
        if (base, count) not in _warned:
            _warned.add((base, count))
            logger.warning(
                "all %d sandbox uids from %d are in use: kernels now share uid %d (and its per-user "
                "quotas); raise SandboxPolicy.sandbox_uids",
                count,
                base,
                uid,
            )
        return _take(uid, shared=True)


def _take(uid: int, *, shared: bool = False) -> UidLease:
    held = _held.get(uid)
    if held is None:
        held = _held[uid] = _Held(0, _try_lock(uid)[1])
    held.users += 1
    return UidLease(uid, shared=shared)


def _release(uid: int) -> None:
    with _lock:
        held = _held.get(uid)
        if held is None:
            return
        held.users -= 1
        if held.users <= 0:
            del _held[uid]
            if held.lock_fd is not None:
                os.close(held.lock_fd)  # closing the descriptor drops the flock


def _try_lock(uid: int) -> tuple[bool, int | None]:
    """``(False, None)`` when another process holds ``uid``; else ``(True, descriptor holding its
    host-wide lock)``, or ``(True, None)`` without a usable lock directory (leases per process only)."""
    directory = _directory()
    if directory < 0:
        return True, None
    try:
        fd = os.open(str(uid), _LOCK_FLAGS, 0o600, dir_fd=directory)
    except OSError:
        return True, None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            return True, None
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return False, None
    except OSError:
        os.close(fd)
        return True, None
    return True, fd


def _directory() -> int:
    """The lock directory's descriptor: made by this user, mode 0700, reached without links."""
    global _lease_dir
    if _lease_dir is not None:
        return _lease_dir
    _lease_dir = -1
    for parent in LEASE_DIRS:
        with contextlib.suppress(OSError):
            parent_fd = os.open(parent, _DIR_FLAGS)
            try:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(_LEASE_DIR_NAME, 0o700, dir_fd=parent_fd)
                fd = os.open(_LEASE_DIR_NAME, _DIR_FLAGS, dir_fd=parent_fd)
            finally:
                os.close(parent_fd)
            info = os.fstat(fd)
            if info.st_uid == os.geteuid() and not info.st_mode & 0o077:
                _lease_dir = fd
                return fd
            os.close(fd)
            logger.warning("ignoring %s/%s: not a private directory of this user", parent, _LEASE_DIR_NAME)
    return _lease_dir
