"""Host-side file operations in a directory hostile code can write: nothing is followed, nothing blocks.

Each attack plants a symlink, FIFO or hard link where the application will touch a path; each has a
control that shows the plain operation (what the code did before) falling for it.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from blocking_kit import blocks_on_fifo, bounded
from ipybox_core._safe_fs import MAX_TREE_DEPTH, SafeDir, anchored
from ipybox_core.errors import IpyboxError, UnsafePathError


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A directory the attacker wants the application to write into."""
    path = tmp_path / "outside"
    path.mkdir()
    (path / "secret").write_text("root only")
    return path


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """The trusted directory (a workspace); everything below it is the attacker's."""
    path = tmp_path / "workspace"
    path.mkdir()
    return path.resolve()  # SafeDir.open follows no symlink, also none above the workspace


def test_a_symlinked_directory_on_the_way_is_refused(root: Path, outside: Path) -> None:
    (root / "mcptools").symlink_to(outside)
    with pytest.raises(UnsafePathError, match=r"refusing .*workspace/mcptools: it is a symbolic link"):
        SafeDir.open(root / "mcptools" / "pkg", create=True)
    assert sorted(p.name for p in outside.iterdir()) == ["secret"]
    # control: the plain mkdir -p follows the link and creates the directory outside
    (root / "mcptools" / "pkg").mkdir(parents=True)
    assert (outside / "pkg").is_dir()


def test_a_symlinked_file_is_refused_for_reading_and_appending(root: Path, outside: Path) -> None:
    (root / "log").symlink_to(outside / "secret")
    with SafeDir.open(root) as directory:
        with pytest.raises(UnsafePathError, match="log: it is a symbolic link"):
            directory.read_bytes("log", limit=100)
        with pytest.raises(UnsafePathError, match="symbolic link"):
            directory.append("log", b"planted\n")
    assert (outside / "secret").read_text() == "root only"
    # control: a plain append writes through the link
    with (root / "log").open("a") as stream:
        stream.write("planted\n")
    assert (outside / "secret").read_text() == "root only" + "planted\n"


def test_a_fifo_never_blocks(root: Path) -> None:
    fifo = root / "log"
    os.mkfifo(fifo)
    with SafeDir.open(root) as directory:
        error = bounded(lambda: directory.read_bytes("log", limit=100))
        assert isinstance(error, UnsafePathError) and "log: it is a FIFO" in str(error)
        assert isinstance(bounded(lambda: directory.append("log", b"x")), UnsafePathError)
    # control: a plain open of the FIFO blocks until somebody opens the other end
    assert blocks_on_fifo(fifo, fifo.read_text)


def test_a_fifo_opened_after_the_check_is_refused_by_fstat(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The entry may change between the check and the open: the open itself cannot block and the
    opened file is checked again (here the pre-open check is skipped to force that path)."""
    fifo = root / "log"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # a reader exists: a writer's open succeeds
    try:
        monkeypatch.setattr(SafeDir, "check_entry", lambda self, name, *kinds: None)
        with SafeDir.open(root) as directory:
            error = bounded(lambda: directory.append("log", b"x"))
            assert isinstance(error, UnsafePathError) and "FIFO" in str(error)
            error = bounded(lambda: directory.read_bytes("log", limit=10))
            assert isinstance(error, UnsafePathError) and "FIFO" in str(error)
    finally:
        os.close(reader)


def test_a_planted_hard_link_is_refused(root: Path, outside: Path) -> None:
    os.link(outside / "secret", root / "log")
    with SafeDir.open(root) as directory:
        with pytest.raises(UnsafePathError, match="log: it is a file with 2 hard links"):
            directory.read_bytes("log", limit=100)
        with pytest.raises(UnsafePathError, match="2 hard links"):
            directory.append("log", b"planted\n")
    assert (outside / "secret").read_text() == "root only"
    # control: a plain read returns the linked file's content
    assert (root / "log").read_text() == "root only"


def test_replace_swaps_a_planted_symlink_for_a_file_and_never_writes_through_it(
    root: Path, outside: Path
) -> None:
    (root / "__init__.py").symlink_to(outside / "secret")
    with SafeDir.open(root) as directory:
        directory.replace("__init__.py", b"new\n")
    assert not (root / "__init__.py").is_symlink() and (root / "__init__.py").read_text() == "new\n"
    assert (outside / "secret").read_text() == "root only"
    assert sorted(p.name for p in root.iterdir()) == ["__init__.py"]  # no temporary file left


def test_remove_tree_removes_links_not_their_targets(root: Path, outside: Path) -> None:
    tree = root / "old"
    (tree / "sub").mkdir(parents=True)
    (tree / "sub" / "to_outside").symlink_to(outside)
    (tree / "to_secret").symlink_to(outside / "secret")
    os.link(outside / "secret", tree / "sub" / "hard")
    os.mkfifo(tree / "sub" / "fifo")
    with SafeDir.open(root) as directory:
        assert bounded(lambda: directory.remove_tree("old")) is None
        directory.remove_tree("old")  # missing is fine
    assert not tree.exists()
    assert sorted(p.name for p in outside.iterdir()) == ["secret"]
    assert (outside / "secret").read_text() == "root only"


def test_remove_tree_given_a_symlink_removes_only_the_link(root: Path, outside: Path) -> None:
    (root / "old").symlink_to(outside)
    with SafeDir.open(root) as directory:
        directory.remove_tree("old")
    assert not os.path.lexists(root / "old") and (outside / "secret").exists()


def test_remove_tree_refuses_a_tree_deeper_than_the_limit(root: Path) -> None:
    deep = root / "old"
    for _ in range(MAX_TREE_DEPTH + 2):
        deep = deep / "d"
    deep.mkdir(parents=True)
    with SafeDir.open(root) as directory, pytest.raises(UnsafePathError, match="deeper than"):
        directory.remove_tree("old")


def test_open_refuses_a_file_where_a_directory_is_expected(root: Path) -> None:
    (root / "mcptools").write_text("")
    with pytest.raises(UnsafePathError, match="mcptools: it is a regular file"):
        SafeDir.open(root / "mcptools", create=True)
    with pytest.raises(FileNotFoundError):
        SafeDir.open(root / "missing")
    assert issubclass(UnsafePathError, IpyboxError) and issubclass(UnsafePathError, OSError)


def test_anchored_resolves_only_the_trusted_part(tmp_path: Path, outside: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "alias").symlink_to(real)  # the user's own symlink, above the trusted boundary
    (real / "logs").symlink_to(outside)  # planted below it
    assert anchored(tmp_path / "alias" / "logs" / "audit.jsonl", tmp_path / "alias") == (
        real.resolve() / "logs" / "audit.jsonl"
    )
    assert anchored(tmp_path / "alias" / "audit.jsonl") == real.resolve() / "audit.jsonl"
    assert (
        anchored(tmp_path / "elsewhere" / "x", tmp_path / "alias") == tmp_path.resolve() / "elsewhere" / "x"
    )
    with pytest.raises(UnsafePathError, match="logs: it is a symbolic link"):
        SafeDir.open(anchored(tmp_path / "alias" / "logs", tmp_path / "alias"))
