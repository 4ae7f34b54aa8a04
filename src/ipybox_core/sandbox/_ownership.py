"""Giving an empty writable directory to the unprivileged uid a root application's kernel runs as."""

from __future__ import annotations

import os
from pathlib import Path

_DIRECTORY_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def give_directory(directory: Path, uid: int) -> None:
    """Make ``directory`` itself owned by ``uid`` (group ``uid`` too), following no link."""
    fd = os.open(directory, _DIRECTORY_FLAGS)
    try:
        os.fchown(fd, uid, uid)
    finally:
        os.close(fd)
