"""File-tree scans done at launch: secrets by name in user trees, private files in system trees."""

from __future__ import annotations

import fnmatch
import os
import stat
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

SKIPPED_DIRS = frozenset({".git", "node_modules", "__pycache__"})
"""Directories not descended into when looking for secrets by name (large, and never hold them)."""


def find_by_name(root: Path, patterns: Sequence[str]) -> list[Path]:
    """Entries under ``root`` whose name matches one of ``patterns``, plus every unix socket.

    Sockets are included because connecting to a socket needs no write access to its file system:
    a socket left in the workspace would be a way out of the sandbox.
    """
    found: list[Path] = []
    for entry in _walk(root, SKIPPED_DIRS):
        if any(fnmatch.fnmatchcase(entry.name, pattern) for pattern in patterns) or _is_socket(entry):
            found.append(Path(entry.path))
    return found


PRIVATE_SCAN_TTL = 30.0
"""Seconds a scan of a system tree (:func:`find_private`) is reused by later launches."""
_private_cache: dict[Path, tuple[float, list[Path]]] = {}
_private_lock = threading.Lock()


def find_private(root: Path) -> list[Path]:
    """Entries under ``root`` that other users cannot read (no ``o+r``; dirs also need ``o+x``).

    When the application runs as root, the sandbox (root in a user namespace, without capabilities)
    still owns root's files; hiding these gives it only what an unprivileged user could read.
    Sockets are included for the same reason as in :func:`find_by_name`. A scan (about 5 ms for
    ``/etc``) is reused for :data:`PRIVATE_SCAN_TTL` seconds.
    """
    now = time.monotonic()
    with _private_lock:
        cached = _private_cache.get(root)
        if cached is not None and now - cached[0] < PRIVATE_SCAN_TTL:
            return list(cached[1])
    found = [Path(entry.path) for entry in _walk(root, frozenset(), prune=_private) if _private(entry)]
    with _private_lock:
        _private_cache[root] = (now, found)
    return list(found)


def _private(entry: os.DirEntry[str]) -> bool:
    """Not readable by other users, or a socket (DirEntry caches the one lstat this needs)."""
    try:
        mode = entry.stat(follow_symlinks=False).st_mode
    except OSError:
        return False
    if stat.S_ISLNK(mode):
        return False
    if stat.S_ISSOCK(mode):
        return True
    if stat.S_ISDIR(mode):
        return (mode & (stat.S_IROTH | stat.S_IXOTH)) != (stat.S_IROTH | stat.S_IXOTH)
    return not mode & stat.S_IROTH


def _is_socket(entry: os.DirEntry[str]) -> bool:
    try:
        return stat.S_ISSOCK(entry.stat(follow_symlinks=False).st_mode)
    except OSError:
        return False


def _walk(
    root: Path, skipped: frozenset[str], prune: Callable[[os.DirEntry[str]], bool] | None = None
) -> Iterator[os.DirEntry[str]]:
    stack = [str(root)]
    while stack:
        try:
            with os.scandir(stack.pop()) as entries:
                for entry in entries:
                    yield entry
                    if entry.name in skipped or (prune is not None and prune(entry)):
                        continue
                    try:
                        if entry.is_dir(follow_symlinks=False):
                            stack.append(entry.path)
                    except OSError:
                        continue
        except OSError:
            continue
