"""Helpers shared by the kernel tests: process inspection through /proc (psutil is not installed)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

PROC = Path("/proc")


def _stat_fields(pid: int | str) -> list[bytes] | None:
    """The fields of /proc/<pid>/stat after the command name (state, ppid, pgrp, session, ...)."""
    try:
        raw = (PROC / str(pid) / "stat").read_bytes()
    except OSError:
        return None
    return raw[raw.rfind(b")") + 2 :].split()


def _all_processes() -> Iterator[tuple[int, list[bytes]]]:
    for entry in os.scandir(PROC):
        if entry.name.isdigit() and (fields := _stat_fields(entry.name)) is not None:
            yield int(entry.name), fields


def is_running(pid: int) -> bool:
    """Whether ``pid`` exists and is not a zombie."""
    fields = _stat_fields(pid)
    return fields is not None and fields[0] != b"Z"


def descendants(pid: int) -> set[int]:
    """Every live process below ``pid``."""
    children: dict[int, list[int]] = {}
    for child, fields in _all_processes():
        children.setdefault(int(fields[1]), []).append(child)
    found: set[int] = set()
    stack = [pid]
    while stack:
        for child in children.get(stack.pop(), ()):
            found.add(child)
            stack.append(child)
    return found


def pids_running(command_fragment: str) -> set[int]:
    """Live processes (other than this one) whose command line contains ``command_fragment``."""
    found: set[int] = set()
    for pid, fields in _all_processes():
        if pid == os.getpid() or fields[0] == b"Z":
            continue
        try:
            cmdline = (PROC / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if command_fragment in cmdline:
            found.add(pid)
    return found


def env_of(pid: int) -> dict[str, str]:
    """The environment a process was started with."""
    raw = (PROC / str(pid) / "environ").read_bytes()
    pairs = (item.split(b"=", 1) for item in raw.split(b"\0") if b"=" in item)
    return {key.decode(): value.decode() for key, value in pairs}
