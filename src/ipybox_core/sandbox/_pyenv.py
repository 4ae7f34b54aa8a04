"""Find the directories a Python interpreter needs: its prefixes, site-packages and ``.pth`` paths."""

from __future__ import annotations

import os
import shutil
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

ENVIRONMENT_TTL = 30.0
"""Seconds a discovered Python environment is reused by later launches."""
_cache: dict[tuple[Path, str], tuple[float, PythonPaths]] = {}
_lock = threading.Lock()


@dataclass
class PythonPaths:
    """What an interpreter reads: its installation ``prefixes`` and ``extra`` import paths.

    ``extra`` holds ``.pth`` entries (editable installs) and ``PYTHONPATH`` directories; those are
    often project directories and get the same secret scan as the workspace.
    """

    prefixes: list[Path] = field(default_factory=list)
    extra: list[Path] = field(default_factory=list)


def find_executable(program: str, env: Mapping[str, str]) -> Path | None:
    """``program`` as an absolute path without ``..`` (looked up on the launch environment's ``PATH``).

    A ``..`` would be resolved inside the sandbox, where the directory before it may not exist
    (``/home/me/project/../venv/bin/python`` with only the venv visible): the directory part is
    resolved here instead; the file name is kept (a venv's ``python`` is a symlink that must stay one).
    """
    if os.sep in program:
        path = Path(program)
        return without_dotdot(path) if path.exists() else None
    found = shutil.which(program, path=env.get("PATH", os.defpath))
    return without_dotdot(Path(found)) if found else None


def without_dotdot(path: Path) -> Path:
    """``path`` made absolute, its directory resolved when it contains ``..`` (the name is kept)."""
    path = path.absolute()
    if ".." not in path.parts:
        return path
    return Path(os.path.realpath(path.parent)) / path.name


def python_environment_paths(executable: Path, env: Mapping[str, str]) -> PythonPaths:
    """Directories the interpreter ``executable`` reads at start-up and import time.

    Covers a virtualenv (``pyvenv.cfg``) and its base installation, the real interpreter's prefix
    (symlinks resolved), every ``site-packages``/``dist-packages`` directory's ``.pth`` entries
    (editable installs) and ``PYTHONPATH``. Only existing directories are returned. A result is
    reused for :data:`ENVIRONMENT_TTL` seconds.
    """
    executable = without_dotdot(executable)
    key = (executable, env.get("PYTHONPATH", ""))
    now = time.monotonic()
    with _lock:
        cached = _cache.get(key)
        if cached is not None and now - cached[0] < ENVIRONMENT_TTL:
            return PythonPaths(list(cached[1].prefixes), list(cached[1].extra))
    found = _discover(executable, env)
    with _lock:
        _cache[key] = (now, found)
    return PythonPaths(list(found.prefixes), list(found.extra))


def _discover(executable: Path, env: Mapping[str, str]) -> PythonPaths:
    prefixes: list[Path] = []
    venv = executable.parent.parent
    config = venv / "pyvenv.cfg"
    if config.is_file():
        prefixes.append(venv)
        home = _pyvenv_home(config)
        if home is not None:
            prefixes.append(home.parent)
    prefixes.append(executable.resolve().parent.parent)
    found = PythonPaths()
    for prefix in prefixes:
        _add(found.prefixes, prefix.resolve())
        for site_dir in _site_dirs(prefix):
            for entry in _pth_entries(site_dir):
                _add(found.extra, entry)
    for item in env.get("PYTHONPATH", "").split(os.pathsep):
        if item and os.path.isabs(item) and os.path.isdir(item):
            _add(found.extra, Path(item))
    found.prefixes = [path for path in found.prefixes if path.is_dir()]
    return found


def _add(paths: list[Path], path: Path) -> None:
    if path not in paths:
        paths.append(path)


def _pyvenv_home(config: Path) -> Path | None:
    for line in config.read_text(encoding="utf-8", errors="replace").splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() == "home":
            return Path(value.strip()).resolve()
    return None


def _site_dirs(prefix: Path) -> list[Path]:
    dirs: list[Path] = []
    for lib in ("lib", "lib64"):
        for pattern in ("python3*/site-packages", "python3*/dist-packages", "python3/dist-packages"):
            dirs.extend(path for path in (prefix / lib).glob(pattern) if path.is_dir())
    return dirs


def _pth_entries(site_dir: Path) -> list[Path]:
    entries: list[Path] = []
    for pth in sorted(site_dir.glob("*.pth")):
        try:
            lines = pth.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            continue
        for line in lines:
            line = line.strip()
            if not line or line.startswith(("#", "import ", "import\t")):
                continue
            entry = Path(line) if os.path.isabs(line) else site_dir / line
            if entry.is_dir():
                entries.append(entry.resolve())
    return entries
