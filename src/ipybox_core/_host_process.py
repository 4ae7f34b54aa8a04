"""Processes the host starts (pip, uv, MCP stdio servers, bubblewrap probes) never start in, or look
things up in, a directory that sandboxed code can write.

The rule, in one place:

- **working directory**: :func:`host_cwd`, which is ``/`` unless an operator configured one
  explicitly (an MCP server config's ``cwd``). No sandbox can write ``/`` (a writable sandbox path
  may not contain the system directories), and it has no parent in which a tool could look for a
  project or a config file. Every ``subprocess``/``asyncio``/MCP-SDK spawn in ``src/`` passes
  ``cwd=host_cwd(...)``; ``tests/core/test_host_subprocesses.py`` checks that statically.
- **interpreter**: explicit, in isolated mode (:func:`isolated_python`: ``python -I``, so neither the
  working directory nor a script's directory is on ``sys.path``, no ``PYTHON*`` variable applies and
  no user site-packages are read).
- **environment**: :func:`host_environment` drops ``PYTHON*`` variables and gives a ``PATH``
  (:func:`host_search_path`) without relative entries and without directories a sandbox can write;
  executables are looked up there (:func:`host_which`).
- **what a tool reads**: the trees sandboxes in this process can write are remembered
  (:func:`mark_sandbox_writable`, called when a sandbox launcher is made); :func:`refuse_sandbox_writable`
  stops a tool before it runs when something it would read (its interpreter's environment, its
  config and cache directories, a path in its arguments) lies in one of them.

Paths an operator names explicitly (an MCP server's ``command``, ``args`` or ``cwd``, a ``--pip-arg``
not pointing into a sandbox) are the operator's choice and are used as given.
"""

from __future__ import annotations

import bisect
import os
import shutil
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from ipybox_core.errors import ConfigError

HOST_CWD = "/"
"""The working directory of a host-side subprocess that has no configured one."""

_PRUNE_ABOVE = 256
"""More marked trees than this: forget those that no longer exist (a removed workspace holds nothing)."""


class _Marked:
    """The sandbox-writable trees of this process, and the same sorted (for prefix look-ups)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.trees: dict[str, bool] = {}
        """Tree (absolute, normalised; also with symlinks resolved) -> whether the host's Python
        environment is mounted read-only over it (``python_env``)."""
        self.view: tuple[dict[str, bool], list[str]] = ({}, [])
        """A snapshot for readers: replaced, never changed."""

    def add(self, forms: list[str], python_env_read_only: bool) -> None:
        with self.lock:
            for form in forms:
                self.trees[form] = self.trees.get(form, True) and python_env_read_only
            if len(self.trees) > _PRUNE_ABOVE:
                for gone in [tree for tree in self.trees if tree not in forms and not os.path.lexists(tree)]:
                    del self.trees[gone]
            self.view = (dict(self.trees), sorted(self.trees))


_marked = _Marked()


def host_cwd(configured: str | os.PathLike[str] | None = None) -> str:
    """``cwd=`` for a host-side subprocess: the operator's explicitly ``configured`` directory, else ``/``."""
    return HOST_CWD if configured is None else os.fspath(configured)


def isolated_python(python: str, *args: str) -> list[str]:
    """The command line running ``python`` in isolated mode (``-I``) with ``args``."""
    return [python, "-I", *args]


def mark_sandbox_writable(trees: Iterable[str | os.PathLike[str]], *, python_env_read_only: bool) -> None:
    """Remember ``trees`` as writable by sandboxed code, for the rest of this process.

    ``python_env_read_only``: the sandbox mounts the host's Python environment read-only over these
    trees (its policy's ``python_env``), so an environment inside one of them stays the host's.
    A tree stays marked after its sandbox ended: what the code left there is still not the host's.
    """
    _marked.add([form for tree in trees for form in _forms(Path(tree))], python_env_read_only)


def sandbox_writable_trees() -> tuple[Path, ...]:
    """The trees sandboxes of this process can write (or could, earlier)."""
    return tuple(Path(tree) for tree in _marked.view[1])


@dataclass(frozen=True)
class HostRead:
    """Something a host-side tool reads, for :func:`refuse_sandbox_writable`."""

    what: str
    """What it is, for the error message (``"pip's user config directory"``)."""
    path: Path
    tree: bool = True
    """A directory the tool reads below (a writable tree *inside* it counts too), not one file."""
    python_env: bool = False
    """Part of the host's Python environment (read-only in sandboxes whose policy has ``python_env``)."""


def sandbox_can_write(read: HostRead) -> Path | None:
    """The marked tree through which sandboxed code can change what ``read`` names, or None."""
    marked, ordered = _marked.view
    for path in _forms(read.path):
        for ancestor in _ancestors(path):
            env_read_only = marked.get(ancestor)
            if env_read_only is None:
                continue
            if read.python_env and env_read_only and path != ancestor:
                continue  # mounted read-only over the writable tree
            return Path(ancestor)
        if read.tree:  # a marked tree below the directory
            prefix = path.rstrip(os.sep) + os.sep
            index = bisect.bisect_left(ordered, prefix)
            if index < len(ordered) and ordered[index].startswith(prefix):
                return Path(ordered[index])
    return None


def refuse_sandbox_writable(tool: str, reads: Iterable[HostRead]) -> None:
    """Raise :class:`ConfigError` naming the first of ``reads`` that sandboxed code can write.

    Raises:
        ConfigError: ``tool`` would read code or configuration sandboxed code could have written.
    """
    for read in reads:
        tree = sandbox_can_write(read)
        if tree is not None:
            raise ConfigError(
                f"refusing to run {tool} on the host: {read.what} ({read.path}) can be written by "
                f"sandboxed code (the sandbox writes {tree}). Keep the sandbox's workspace and "
                "allow_write paths away from the home directory and the Python environment."
            )


def host_search_path(path: str | None = None) -> str:
    """``path`` (default: this process's ``PATH``) without relative entries and without directories
    sandboxed code can write; ``os.defpath`` when nothing is left."""
    entries: list[str] = []
    for entry in (os.environ.get("PATH", os.defpath) if path is None else path).split(os.pathsep):
        if not os.path.isabs(entry) or entry in entries:
            continue
        if sandbox_can_write(HostRead("a PATH entry", Path(entry), tree=False)) is None:
            entries.append(entry)
    return os.pathsep.join(entries) or os.defpath


def host_which(name: str) -> str | None:
    """The absolute path of the executable ``name``, looked up on :func:`host_search_path`.

    A name with a ``/`` is an explicit path (the operator's choice) and is only made absolute.
    """
    if os.sep in name:
        found = shutil.which(name)
        return os.path.abspath(found) if found is not None else None
    return shutil.which(name, path=host_search_path())


def host_environment(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """``base`` (default: this process's environment) for a host-side tool: no ``PYTHON*``
    variables (``-I`` ignores them, but a tool's own children would not), ``PATH`` from
    :func:`host_search_path`."""
    source = os.environ if base is None else base
    env = {key: value for key, value in source.items() if not key.startswith("PYTHON")}
    env["PATH"] = host_search_path(source.get("PATH", os.defpath))
    return env


def _forms(path: Path) -> set[str]:
    """``path`` made absolute and normalised, and with its symlinks resolved."""
    absolute = os.path.normpath(os.path.abspath(path))
    return {absolute, os.path.realpath(absolute)}


def _ancestors(path: str) -> list[str]:
    """``path`` (absolute, normalised) and every directory above it, up to ``/``."""
    found = [path]
    while (parent := os.path.dirname(found[-1])) != found[-1]:
        found.append(parent)
    return found
