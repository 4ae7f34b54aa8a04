"""Private directories of applications that died without removing them.

A killed application cannot remove its private directories: kernel runtime directories (its kernels
exit on their own: they watch their parent), the sandbox launcher's ``ipybox-launch-*`` and the MCP
servers' ``ipybox-mcp-*`` log directories. Each records its owner (:func:`mark_owner`); the next
application that creates a kernel runtime directory removes those whose owner is gone.

Anything inside such a directory may have been planted by sandboxed code (or by another user's
process), so the sweep follows no symlink, never opens anything that could block (the owner file is
opened ``O_NOFOLLOW | O_NONBLOCK``, checked to be a regular file and read up to a few bytes) and skips
directories of other users.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from pathlib import Path

import psutil

from ipybox_core._safe_fs import SafeDir, anchored
from ipybox_core.kernel._process import pid_exists

OWNER_FILE = ".ipybox-owner"
LEFTOVER_PREFIXES = ("ipybox-launch-", "ipybox-mcp-")
"""Directories made with :func:`tempfile.mkdtemp` (in the default temporary directory) and marked."""

_OWNER_LIMIT = 64
_swept: set[Path] = set()


def _process_start(pid: int) -> str | None:
    """The start time of ``pid`` (epoch seconds, as text), to tell a live owner from a reused pid."""
    try:
        return f"{psutil.Process(pid).create_time():.2f}"
    except psutil.Error:
        return None


def _owner_alive(pid: int, start: str) -> bool:
    if not pid_exists(pid):
        return False
    current = _process_start(pid)
    # A marker without a start time, or written by an older ipybox (clock ticks, no '.'), trusts the pid.
    return current is None or "." not in start or start == current


def mark_owner(directory: Path) -> None:
    """Record this process as the owner of ``directory`` (a directory it has just created)."""
    pid = os.getpid()
    with SafeDir.open(anchored(directory)) as opened:
        opened.write_new(OWNER_FILE, f"{pid} {_process_start(pid) or ''}".encode(), 0o644)


def sweep_stale_dirs(parent: Path, prefix: str) -> None:
    """Remove ``parent/<prefix>*`` directories whose recorded owner process is gone (once per parent),
    and the leftover launcher and MCP log directories in the default temporary directory."""
    parent = Path(os.path.realpath(parent))
    default = Path(os.path.realpath(tempfile.gettempdir()))
    places = [(parent, prefix)] + [
        (default, leftover)
        for leftover in LEFTOVER_PREFIXES
        if not (default == parent and leftover.startswith(prefix))  # covered by the first
    ]
    for where, start in places:
        if where / start in _swept:
            continue
        _swept.add(where / start)
        with contextlib.suppress(OSError), SafeDir.open(where) as directory:
            _sweep(directory, start)


def _sweep(directory: SafeDir, prefix: str) -> None:
    uid = os.getuid()
    with os.scandir(directory.path) as entries:
        names = [entry.name for entry in entries if entry.name.startswith(prefix)]
    for name in names:
        try:
            with directory.subdir(name) as candidate:
                if os.fstat(candidate.fd).st_uid != uid:
                    continue
                pid = _recorded_owner(candidate)
        except (OSError, ValueError):
            continue  # not one of ours, not a plain directory, or being created right now
        if pid is None or pid[0] == os.getpid() or _owner_alive(*pid):
            continue
        with contextlib.suppress(OSError):
            directory.remove_tree(name)


def _recorded_owner(candidate: SafeDir) -> tuple[int, str] | None:
    """``(pid, start time)`` from the owner file: a regular file, read without blocking, bounded."""
    if candidate.check_entry(OWNER_FILE, stat.S_IFREG) is None:
        return None
    pid_text, _, start = candidate.read_bytes(OWNER_FILE, limit=_OWNER_LIMIT).decode().partition(" ")
    return int(pid_text), start.strip()
