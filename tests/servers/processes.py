"""Counting child processes through /proc (to prove that nothing is left behind)."""

from __future__ import annotations

import os
from pathlib import Path


def _parent_of(pid_dir: Path) -> int | None:
    try:
        stat = (pid_dir / "stat").read_text()
    except OSError:  # the process ended meanwhile
        return None
    # "pid (comm) state ppid ...": comm may contain spaces and parentheses, so split after the last ")"
    return int(stat.rsplit(")", 1)[1].split()[1])


def descendant_pids(root: int | None = None) -> set[int]:
    """Every live or zombie process below ``root`` (default: this process)."""
    root = os.getpid() if root is None else root
    children: dict[int, list[int]] = {}
    for pid_dir in Path("/proc").iterdir():
        if pid_dir.name.isdigit():
            parent = _parent_of(pid_dir)
            if parent is not None:
                children.setdefault(parent, []).append(int(pid_dir.name))
    found: set[int] = set()
    stack = [root]
    while stack:
        for child in children.get(stack.pop(), []):
            if child not in found:
                found.add(child)
                stack.append(child)
    return found


def command_line(pid: int) -> str:
    """The command line of ``pid`` ("" if it is gone)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
    except OSError:
        return ""
