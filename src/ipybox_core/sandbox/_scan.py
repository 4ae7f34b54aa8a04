"""File-tree scans done at launch: secrets in user trees (by name and by identity), private files in
system trees.

A user tree (the workspace, ``allow_*`` paths, project directories on the Python path) may be
writable by the sandbox, so its scan skips nothing by name: a secret moved under ``node_modules/``
or ``.git/`` is found there like anywhere else. The scan is bounded (:class:`ScanBound`); when it
reaches the bound it gives up with :class:`HiddenScanGaveUp` rather than launch with a partial view.
"""

from __future__ import annotations

import fnmatch
import logging
import os
import re
import stat
import threading
import time
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ipybox_core.errors import SandboxError

logger = logging.getLogger(__name__)

FileId = tuple[int, int]
"""A file's identity, ``(st_dev, st_ino)``: the same under every name (rename, hard link) it has."""

_CLOCK_EVERY = 1024
"""Entries between two looks at the clock."""


@dataclass(frozen=True)
class ScanBound:
    """How much one launch's scan of the user trees may visit: ``entries`` (all trees together)
    and ``seconds`` of wall-clock time."""

    entries: int
    seconds: float


class HiddenScanGaveUp(SandboxError):
    """The scan for hidden paths reached its bound: the kernel is not started (fail closed)."""


@dataclass
class TreeScan:
    """What a scan of the user trees found (host paths, as strings: a scan may visit millions).

    Nothing inside a directory that is itself found is listed again (the directory's mask covers it).
    """

    matches: list[str] = field(default_factory=list)
    """Entries whose name matches a hidden-name pattern, and every unix socket."""
    known: list[str] = field(default_factory=list)
    """Entries whose identity the caller already hides: a hidden file whose directory was renamed,
    the target of a re-pointed link, another name (hard link) of an explicitly hidden file."""
    linked: dict[FileId, list[str]] = field(default_factory=dict)
    """Every name of each regular file that has more than one (hard links), by identity."""
    covered_links: set[FileId] = field(default_factory=set)
    """Identities in :attr:`linked` of which one name is found or lies inside a found directory:
    every other name of such a file must be hidden too."""
    entries: int = 0


def scan_user_trees(
    trees: Sequence[Path],
    patterns: Sequence[str],
    *,
    known: Collection[FileId],
    bound: ScanBound,
    max_found: int,
) -> TreeScan:
    """Visit every entry under ``trees`` (symlinks are not followed, no directory is skipped).

    Unix sockets are matched because connecting to a socket needs no write access to its file
    system: a socket left in the workspace would be a way out of the sandbox. Raises
    :class:`HiddenScanGaveUp` (and logs why) once ``bound`` is exceeded or more than ``max_found``
    entries are found.
    """
    matches = _name_matcher(patterns)
    found = TreeScan()
    started = time.monotonic()
    for tree in trees:
        stack = [(str(tree), False)]
        while stack:
            directory, covered = stack.pop()
            for entry, info in _entries(directory):
                found.entries += 1
                if found.entries > bound.entries or (
                    found.entries % _CLOCK_EVERY == 0 and time.monotonic() - started > bound.seconds
                ):
                    raise _gave_up(found.entries, time.monotonic() - started, bound, tree)
                identity = (info.st_dev, info.st_ino)
                hit = True
                if matches(entry.name) or stat.S_ISSOCK(info.st_mode):
                    if not covered:
                        found.matches.append(entry.path)
                elif identity in known:
                    if not covered:
                        found.known.append(entry.path)
                else:
                    hit = False
                if len(found.matches) + len(found.known) > max_found:
                    raise _too_many(max_found, tree)
                if stat.S_ISREG(info.st_mode) and info.st_nlink > 1:
                    found.linked.setdefault(identity, []).append(entry.path)
                    if covered or hit:
                        found.covered_links.add(identity)
                if stat.S_ISDIR(info.st_mode):
                    stack.append((entry.path, covered or hit))
    return found


def _too_many(limit: int, tree: Path) -> HiddenScanGaveUp:
    logger.error(
        "sandbox: more than %d paths to hide in %s (each is a mount); the kernel is not started", limit, tree
    )
    return HiddenScanGaveUp(
        f"the sandbox would hide more than {limit} paths in {tree} (each is a mount): the kernel is "
        "not started. Remove files named like secrets (SandboxPolicy.hidden_names) or sockets from "
        "the workspace."
    )


def _gave_up(entries: int, seconds: float, bound: ScanBound, tree: Path) -> HiddenScanGaveUp:
    logger.error(
        "sandbox: the hidden-path scan gave up in %s after %d entries and %.1f s (bound: %d entries, "
        "%g s); the kernel is not started",
        tree,
        entries,
        seconds,
        bound.entries,
        bound.seconds,
    )
    return HiddenScanGaveUp(
        f"the sandbox's scan for hidden files gave up in {tree} after {entries} entries and "
        f"{seconds:.1f} s (SandboxPolicy.hidden_scan_entries={bound.entries}, "
        f"hidden_scan_seconds={bound.seconds:g}): the kernel is not started, since a secret in the "
        "unscanned rest would be readable. Remove files from the workspace (or the allowed paths), "
        "or raise the bound."
    )


def _name_matcher(patterns: Sequence[str]) -> Callable[[str], bool]:
    """One compiled regular expression for all ``fnmatch`` patterns (case-sensitive)."""
    if not patterns:
        return lambda name: False
    regex = re.compile("|".join(f"(?:{fnmatch.translate(pattern)})" for pattern in patterns))
    return lambda name: regex.match(name) is not None


def _entries(directory: str) -> Iterator[tuple[os.DirEntry[str], os.stat_result]]:
    """The entries of ``directory`` with their ``lstat``; an unreadable directory has none, entries
    that vanish meanwhile are left out."""
    try:
        with os.scandir(directory) as entries:
            for entry in entries:
                try:
                    info = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                yield entry, info
    except OSError:
        return


PRIVATE_SCAN_TTL = 30.0
"""Seconds a scan of a system tree (:func:`find_private`) is reused by later launches."""
_private_cache: dict[Path, tuple[float, list[Path]]] = {}
_private_lock = threading.Lock()


def find_private(root: Path) -> list[Path]:
    """Entries under ``root`` that other users cannot read (no ``o+r``; dirs also need ``o+x``).

    When the application runs as root, the sandbox (root in a user namespace, without capabilities)
    still owns root's files; hiding these gives it only what an unprivileged user could read.
    Sockets are included for the same reason as in :func:`scan_user_trees`. A scan (about 5 ms
    for ``/etc``) is reused for :data:`PRIVATE_SCAN_TTL` seconds.
    """
    now = time.monotonic()
    with _private_lock:
        cached = _private_cache.get(root)
        if cached is not None and now - cached[0] < PRIVATE_SCAN_TTL:
            return list(cached[1])
    found = [Path(entry.path) for entry in _walk(root, prune=_private) if _private(entry)]
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


def _walk(root: Path, prune: Callable[[os.DirEntry[str]], bool]) -> Iterator[os.DirEntry[str]]:
    stack = [str(root)]
    while stack:
        try:
            with os.scandir(stack.pop()) as entries:
                for entry in entries:
                    yield entry
                    if prune(entry):
                        continue
                    try:
                        if entry.is_dir(follow_symlinks=False):
                            stack.append(entry.path)
                    except OSError:
                        continue
        except OSError:
            continue
