"""The stale-directory sweep: removes only dead owners' directories, follows nothing, never blocks.

Sandboxed code (or another user) can plant a FIFO as ``.ipybox-owner``, a symlink in place of a
directory or a directory of its own in ``/tmp``; the next application's first kernel start sweeps.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest

from blocking_kit import BOUND, blocks_on_fifo
from ipybox_core.kernel import _stale_dirs
from ipybox_core.kernel._stale_dirs import OWNER_FILE, mark_owner, sweep_stale_dirs
from ipybox_core.mcp.registry import McpRegistry
from prerequisites import require


@pytest.fixture
def tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private temporary directory, also the default one (where launch/MCP dirs are made)."""
    monkeypatch.setattr(_stale_dirs, "_swept", set())
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return tmp_path


def dead_pid() -> int:
    process = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True)
    return int(process.stdout)


def owned_dir(parent: Path, name: str, pid: int) -> Path:
    path = parent / name
    path.mkdir()
    (path / OWNER_FILE).write_text(f"{pid} ")
    (path / "file").write_text("x")
    return path


def sweep(parent: Path) -> None:
    thread = threading.Thread(target=sweep_stale_dirs, args=(parent, "ipybox-"), daemon=True)
    thread.start()
    thread.join(BOUND)
    assert not thread.is_alive(), "the sweep blocked"


def test_dead_owners_go_and_everything_planted_stays(tmp: Path) -> None:
    dead = dead_pid()
    gone = [owned_dir(tmp, name, dead) for name in ("ipybox-abc", "ipybox-launch-x", "ipybox-mcp-y")]
    alive = owned_dir(tmp, "ipybox-alive", os.getppid())
    fifo_owner = tmp / "ipybox-fifo"
    fifo_owner.mkdir()
    os.mkfifo(fifo_owner / OWNER_FILE)
    outside = owned_dir(tmp, "outside", dead)
    hard_owner = tmp / "ipybox-hard"
    hard_owner.mkdir()
    os.link(outside / OWNER_FILE, hard_owner / OWNER_FILE)
    (tmp / "ipybox-link").symlink_to(outside)  # a symlink in place of a directory
    inside = owned_dir(tmp, "ipybox-links-inside", dead)
    (inside / "to_outside").symlink_to(outside)
    os.mkfifo(inside / "fifo")
    unowned = tmp / "ipybox-unmarked"
    unowned.mkdir()

    sweep(tmp)

    assert not any(path.exists() for path in gone) and not inside.exists()
    assert alive.is_dir() and (fifo_owner / OWNER_FILE).is_fifo() and unowned.is_dir()
    assert (hard_owner / OWNER_FILE).exists() and (tmp / "ipybox-link").is_symlink()
    assert sorted(p.name for p in outside.iterdir()) == [OWNER_FILE, "file"]


def test_a_directory_of_another_user_stays(tmp: Path) -> None:
    require(os.geteuid() == 0, "changing a directory's owner needs root")
    foreign = owned_dir(tmp, "ipybox-foreign", dead_pid())
    os.chown(foreign, 12345, 12345)
    sweep(tmp)
    assert foreign.is_dir()


def test_leftover_dirs_are_swept_from_the_default_temporary_directory(tmp: Path) -> None:
    runtime_parent = tmp / "short"
    runtime_parent.mkdir()
    dead = dead_pid()
    launch, mcp = owned_dir(tmp, "ipybox-launch-a", dead), owned_dir(tmp, "ipybox-mcp-b", dead)
    other = owned_dir(tmp, "ipybox-other", dead)  # the runtime prefix is swept in the runtime parent only
    sweep(runtime_parent)
    assert not launch.exists() and not mcp.exists() and other.exists()


def test_control_reading_a_fifo_owner_file_with_read_text_blocks(tmp: Path) -> None:
    """The sweep read the owner file with ``Path.read_text``: a planted FIFO blocked it forever."""
    owner = tmp / "ipybox-fifo" / OWNER_FILE
    owner.parent.mkdir()
    os.mkfifo(owner)
    assert blocks_on_fifo(owner, owner.read_text)


def test_creators_mark_their_directories(tmp: Path) -> None:
    registry = McpRegistry()
    owner = (registry.log_dir / OWNER_FILE).read_text().split()
    assert registry.log_dir.parent == tmp and owner[0] == str(os.getpid())
    marked = tmp / "ipybox-launch-m"
    marked.mkdir()
    mark_owner(marked)
    assert (marked / OWNER_FILE).read_text().split()[0] == str(os.getpid())
