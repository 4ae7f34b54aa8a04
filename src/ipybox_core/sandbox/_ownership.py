"""Giving directories to the unprivileged uid a root application's kernel runs as."""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Callable

logger = logging.getLogger(__name__)

_DIRECTORY_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
MAX_GIVE_DEPTH = 64
"""Directory levels :func:`give_tree` descends; deeper entries keep their owner."""


def give_directory(directory: os.PathLike[str] | str, uid: int) -> None:
    """Make ``directory`` itself owned by ``uid`` (group ``uid`` too), following no link."""
    fd = os.open(directory, _DIRECTORY_FLAGS)
    try:
        os.fchown(fd, uid, uid)
    finally:
        os.close(fd)


def give_tree(directory_fd: int, uid: int, taken_from: Callable[[int], bool]) -> int:
    """Give every entry below the open directory ``directory_fd`` whose owner ``taken_from``
    accepts to ``uid`` (group too), following no link and opening nothing that can block.

    For a kept workspace moved under a kernel of another sandbox uid: its files were made by the
    earlier kernel's uid. Returns how many directories were too deep to enter (their entries keep
    their owner).
    """
    return _give_at(directory_fd, uid, taken_from, 0)


def _give_at(fd: int, uid: int, taken_from: Callable[[int], bool], depth: int) -> int:
    skipped = 0
    with os.scandir(fd) as entries:
        children = [(entry.name, entry.stat(follow_symlinks=False)) for entry in entries]
    for name, info in children:
        if taken_from(info.st_uid):
            try:
                os.chown(name, uid, uid, dir_fd=fd, follow_symlinks=False)
            except FileNotFoundError:
                continue
        if not stat.S_ISDIR(info.st_mode):
            continue
        if depth + 1 >= MAX_GIVE_DEPTH:
            skipped += 1
            continue
        try:
            child = os.open(name, _DIRECTORY_FLAGS, dir_fd=fd)
        except OSError:
            continue  # gone, or swapped for something that is not a directory: not followed
        try:
            skipped += _give_at(child, uid, taken_from, depth + 1)
        finally:
            os.close(child)
    if skipped and depth == 0:
        logger.warning("%d directories deeper than %d levels keep their owner", skipped, MAX_GIVE_DEPTH)
    return skipped
