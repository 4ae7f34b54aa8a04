"""Per-kernel cgroups (memory and pids) nested under the application's own cgroups.

A cgroup caps the whole sandbox (every process it starts, and its tmpfs pages) where rlimits only cap
each process. cgroup v2 is used when the application's cgroup delegates the ``memory``/``pids``
controllers to children (``cgroup.subtree_control``); otherwise cgroup v1 hierarchies are used when
writable (as root). The launcher joins the new cgroups before it execs bubblewrap, so every process
of the sandbox is inside them. A kernel's cgroups are named after its runtime directory (a restart
reuses them); an empty one is removed once that directory is gone or its creator process has
exited, by the next launch and at exit.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path

from ipybox_core.kernel._process import pid_exists

CGROUP_ROOT = Path("/sys/fs/cgroup")
SELF_CGROUP = Path("/proc/self/cgroup")
_PREFIX = "ipybox-"
_created: dict[Path, Path] = {}
"""Cgroups made by this process -> the runtime directory of their kernel."""


@dataclass
class KernelCgroups:
    """The cgroups made for one kernel: join them by writing a pid into each of ``procs_files``."""

    procs_files: list[Path] = field(default_factory=list)
    memory: bool = False
    pids: bool = False


def create_cgroups(
    runtime_dir: Path,
    *,
    memory_bytes: int | None,
    max_pids: int | None,
    root: Path = CGROUP_ROOT,
    self_cgroup: Path = SELF_CGROUP,
) -> KernelCgroups:
    """Create (or reuse) the cgroups of the kernel owning ``runtime_dir``.

    They enforce ``memory_bytes``/``max_pids`` where possible: see ``.memory``/``.pids``.
    """
    result = KernelCgroups()
    wanted = {name for name, value in (("memory", memory_bytes), ("pids", max_pids)) if value is not None}
    if not wanted:
        return result
    try:
        memberships = _memberships(self_cgroup.read_text())
    except OSError:
        return result
    digest = hashlib.sha256(str(runtime_dir.absolute()).encode()).hexdigest()[:16]
    name = f"{_PREFIX}{os.getpid()}-{digest}"
    for controllers, parent, version in _parents(memberships, root, wanted):
        _collect_stale(parent)
        child = parent / name
        try:
            child.mkdir(exist_ok=True)
        except OSError:
            continue
        _created[child] = runtime_dir
        done: set[str] = set()
        if "memory" in controllers and memory_bytes is not None and _set_memory(child, memory_bytes, version):
            done.add("memory")
        if "pids" in controllers and max_pids is not None and _write(child / "pids.max", str(max_pids)):
            done.add("pids")
        if not done:
            _remove(child)
            continue
        result.procs_files.append(child / "cgroup.procs")
        result.memory = result.memory or "memory" in done
        result.pids = result.pids or "pids" in done
        wanted -= done
        if not wanted:
            break
    return result


def available_controllers(*, root: Path = CGROUP_ROOT, self_cgroup: Path = SELF_CGROUP) -> set[str]:
    """The controllers (``memory``, ``pids``) this process could put a kernel's cgroup under."""
    try:
        memberships = _memberships(self_cgroup.read_text())
    except OSError:
        return set()
    found: set[str] = set()
    for controllers, _, _ in _parents(memberships, root, {"memory", "pids"}):
        found |= controllers
    return found


def _memberships(text: str) -> list[tuple[str, set[str], str]]:
    """``(hierarchy id, controllers, path)`` per line of ``/proc/self/cgroup``."""
    rows = []
    for line in text.splitlines():
        hierarchy, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        rows.append((hierarchy, {c for c in controllers.split(",") if c}, path))
    return rows


def _parents(
    memberships: list[tuple[str, set[str], str]], root: Path, wanted: set[str]
) -> list[tuple[set[str], Path, int]]:
    """Candidate parent directories with the controllers each can enforce, cgroup v2 first."""
    found: list[tuple[set[str], Path, int]] = []
    for hierarchy, controllers, path in memberships:
        if hierarchy == "0" and not controllers:
            base = root if (root / "cgroup.controllers").exists() else root / "unified"
            parent = base / path.lstrip("/")
            try:
                delegated = set((parent / "cgroup.subtree_control").read_text().split())
            except OSError:
                continue
            usable = delegated & wanted
            if usable and os.access(parent, os.W_OK):
                found.insert(0, (usable, parent, 2))
    for hierarchy, controllers, path in memberships:
        if hierarchy == "0":
            continue
        for controller in sorted(controllers & wanted):
            for mount in (root / controller, root / ",".join(sorted(controllers))):
                parent = mount / path.lstrip("/")
                if parent.is_dir() and os.access(parent, os.W_OK):
                    found.append(({controller}, parent, 1))
                    break
    return found


def _set_memory(cgroup: Path, limit: int, version: int) -> bool:
    if version == 2:
        ok = _write(cgroup / "memory.max", str(limit))
        _write(cgroup / "memory.swap.max", "0")
        return ok
    ok = _write(cgroup / "memory.limit_in_bytes", str(limit))
    _write(cgroup / "memory.memsw.limit_in_bytes", str(limit))
    return ok


def _write(path: Path, value: str) -> bool:
    try:
        path.write_text(value)
    except OSError:
        return False
    return True


def _remove(cgroup: Path) -> None:
    with contextlib.suppress(OSError):
        cgroup.rmdir()
    if not cgroup.exists():
        _created.pop(cgroup, None)


def _collect_stale(parent: Path) -> None:
    """Remove empty kernel cgroups left by dead processes, or by this one for dead kernels."""
    try:
        children = [child for child in parent.iterdir() if child.name.startswith(_PREFIX)]
    except OSError:
        return
    for child in children:
        owner = child.name[len(_PREFIX) :].split("-")[0]
        if not owner.isdigit():
            continue
        if int(owner) == os.getpid():
            runtime_dir = _created.get(child)
            if runtime_dir is None or runtime_dir.exists():
                continue
        elif pid_exists(int(owner)):
            continue
        if _empty(child):
            _remove(child)


def _empty(cgroup: Path) -> bool:
    try:
        return not (cgroup / "cgroup.procs").read_text().strip()
    except OSError:
        return False


@atexit.register
def _remove_own() -> None:
    for cgroup in list(_created):
        _remove(cgroup)
