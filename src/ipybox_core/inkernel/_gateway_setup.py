"""Kernel-side half of a gateway kernel's set-up: runs *inside* the remote kernel.

The host ships this module's source in a silent execution, installs it as the module
``_ipybox_gateway`` and calls :func:`setup`; later executions call :func:`sync` to ship generated
packages. Nothing else of ipybox exists on the kernel's machine: the files it needs (the runtime,
the bootstrap) come as text. Standard library only.
"""

from __future__ import annotations

import asyncio
import atexit
import importlib
import json
import os
import shutil
import stat
import sys
import tempfile
import traceback

MODULE_NAME = "_ipybox_gateway"
REPORT_PREFIX = "__ipybox_gateway_setup__ "
BOOT_ID = ""
"""Set once the set-up finished: tells the host that this kernel still has it (not restarted)."""
BOOT_ERROR = ""
"""The traceback, if the bootstrap failed."""
ROOT = ""
"""The kernel's private directory (first on ``sys.path``)."""
ROOT_PREFIX = "ipybox-gw-"
OWNER_FILE = ".ipybox-owner"
"""``<pid> <start in clock ticks>`` of the kernel that made the directory (the host's format)."""


def setup(
    *,
    boot_id: str,
    files: dict[str, str],
    packages: dict[str, dict[str, str]],
    env: dict[str, str],
    env_files: dict[str, str],
    python_path: list[str],
    cwd: str | None,
    bootstrap_file: str,
    bootstrap_args: dict[str, object],
    reset_cwd: bool,
) -> None:
    """Write ``files`` and ``packages`` into a private directory put first on ``sys.path``, set the
    environment, run the ipybox kernel bootstrap, and print a one-line JSON report."""
    global ROOT
    _sweep_dead_roots()
    root = tempfile.mkdtemp(prefix=ROOT_PREFIX)
    atexit.register(shutil.rmtree, root, True)  # a killed kernel's root is swept by the next set-up
    _write(os.path.join(root, OWNER_FILE), f"{os.getpid()} {_start_ticks(os.getpid()) or ''}")
    _write_tree(root, files)
    for path, package in packages.items():
        _replace_package(root, path, package)
    for name, text in env_files.items():
        env = {**env, name: _write(os.path.join(root, "_env", name), text)}
    os.environ.update(env)
    sys.path[:0] = [p for p in [root, *python_path] if p not in sys.path]
    if cwd is not None:
        os.chdir(cwd)
    namespace: dict[str, object] = {"__name__": "ipybox_kernel_bootstrap"}
    path = os.path.join(root, bootstrap_file)
    with open(path, encoding="utf-8") as source:
        exec(compile(source.read(), path, "exec"), namespace)
    bootstrap = namespace["bootstrap"]
    assert callable(bootstrap)
    workspace = os.getcwd() if reset_cwd else None
    ROOT = root

    def finish() -> None:
        global BOOT_ID, BOOT_ERROR
        try:
            bootstrap(workspace=workspace, **bootstrap_args)
        except BaseException:
            BOOT_ERROR = traceback.format_exc()
        else:
            BOOT_ID = boot_id

    # IPython restores sys.stdout.write / sys.stderr.write at the end of a (synchronous) cell, which
    # would undo the bootstrap's output cap: finish right after this cell instead, outside of it.
    try:
        asyncio.get_running_loop().call_soon(finish)
    except RuntimeError:
        finish()
    importlib.invalidate_caches()
    report = {
        "root": root,
        "real_root": os.path.realpath(root),
        "home": os.path.expanduser("~"),
        "cwd": os.getcwd(),
        "python": sys.version.split()[0],
    }
    print(REPORT_PREFIX + json.dumps(report), flush=True)


def status() -> None:
    """Print the boot id (the set-up is complete) or the bootstrap's traceback."""
    print(BOOT_ID or f"bootstrap failed:\n{BOOT_ERROR}")


def sync(changes: dict[str, dict[str, str] | None]) -> None:
    """Replace (or remove, for None) each package directory ``path`` under the private directory."""
    for path, package in changes.items():
        _replace_package(ROOT, path, package)
    importlib.invalidate_caches()


def _replace_package(root: str, path: str, package: dict[str, str] | None) -> None:
    target = os.path.join(root, path)
    shutil.rmtree(target, ignore_errors=True)
    if package is None:
        return
    _write_tree(target, package)
    parent = os.path.dirname(path)
    while parent:  # parent packages: an empty __init__.py unless one was shipped
        init = os.path.join(root, parent, "__init__.py")
        if not os.path.exists(init):
            _write(init, "")
        parent = os.path.dirname(parent)


def _write_tree(root: str, files: dict[str, str]) -> None:
    for relative, text in files.items():
        _write(os.path.join(root, relative), text)


def _write(path: str, text: str) -> str:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as file:
        file.write(text)
    return path


def _start_ticks(pid: int) -> str | None:
    """When ``pid`` started (clock ticks since boot, from ``/proc``), to tell a reused pid apart."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat_file:
            return stat_file.read().rpartition(")")[2].split()[19]
    except (OSError, IndexError):
        return None


def _owner_alive(pid: int, start: str) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    current = _start_ticks(pid)
    return current is None or not start or current == start


def _sweep_dead_roots() -> None:
    """Remove the private directories of this user's kernels that were killed (atexit never ran).

    Only plain directories of this user with a regular owner file whose process is gone; nothing
    else in the temporary directory is touched."""
    parent = tempfile.gettempdir()
    try:
        entries = [e for e in os.scandir(parent) if e.name.startswith(ROOT_PREFIX)]
    except OSError:
        return
    for entry in entries:
        try:
            info = entry.stat(follow_symlinks=False)
            if not (entry.is_dir(follow_symlinks=False) and info.st_uid == os.getuid()):
                continue
            owner = os.path.join(entry.path, OWNER_FILE)
            fd = os.open(owner, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
            try:
                if not stat.S_ISREG(os.fstat(fd).st_mode):
                    continue
                pid_text, _, start = os.read(fd, 64).decode("ascii").partition(" ")
            finally:
                os.close(fd)
            pid = int(pid_text)
        except (OSError, ValueError):
            continue
        if pid != os.getpid() and not _owner_alive(pid, start.strip()):
            shutil.rmtree(entry.path, ignore_errors=True)
