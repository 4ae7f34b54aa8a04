"""Private runtime directories of applications that died without shutting their kernels down.

A killed application cannot remove its kernels' private directories (its kernels exit on their own:
they watch their parent). Each private directory records its owner; the next application that
creates one removes the directories whose owner is gone.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from pathlib import Path

from ipybox_core.kernel._process import pid_exists

OWNER_FILE = ".ipybox-owner"
_swept: set[Path] = set()


def _process_start(pid: int) -> str | None:
    """The start time of ``pid`` (Linux), to tell a live owner from a reused pid; None elsewhere."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    return raw[raw.rfind(b")") + 2 :].split()[19].decode()


def _owner_alive(pid: int, start: str) -> bool:
    if not pid_exists(pid):
        return False
    current = _process_start(pid)
    return current is None or start in ("", current)


def mark_owner(directory: Path) -> None:
    """Record this process as the owner of ``directory``."""
    pid = os.getpid()
    (directory / OWNER_FILE).write_text(f"{pid} {_process_start(pid) or ''}")


def sweep_stale_dirs(parent: Path, prefix: str) -> None:
    """Remove ``parent/<prefix>*`` directories whose recorded owner process is gone (once per parent)."""
    if parent in _swept:
        return
    _swept.add(parent)
    uid = os.getuid()
    with contextlib.suppress(OSError):
        for entry in os.scandir(parent):
            if not entry.name.startswith(prefix) or not entry.is_dir(follow_symlinks=False):
                continue
            try:
                if entry.stat(follow_symlinks=False).st_uid != uid:
                    continue
                pid_text, _, start = (Path(entry.path) / OWNER_FILE).read_text().partition(" ")
                pid = int(pid_text)
            except (OSError, ValueError):
                continue  # not one of ours (or being created right now)
            if pid != os.getpid() and not _owner_alive(pid, start.strip()):
                shutil.rmtree(entry.path, ignore_errors=True)
