"""The generator never writes, reads or deletes through what sandboxed code planted in the workspace.

``<workspace>/mcptools`` is writable by the sandbox. Symlinks, FIFOs and hard links are planted at
every component the generator touches; generating and removing a package must then refuse with a
clear :class:`UnsafePathError`, change nothing outside ``mcptools`` and never block. The controls
show the plain file operations the generator used before falling for each plant.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from blocking_kit import BOUND, blocks_on_fifo
from ipybox_core.codegen import generate_server_package, remove_server_package
from ipybox_core.codegen._writer import MARKER
from ipybox_core.errors import UnsafePathError
from ipybox_core.mcp.types import ToolInfo

GENERATED_INIT = f'"""MCP server \'s\' {MARKER}."""\n'


def bounded(action: Callable[[], object]) -> tuple[object, BaseException | None]:
    """Run ``action`` in a thread; fail if it does not return (it blocked); ``(result, exception)``."""
    outcome: list[tuple[object, BaseException | None]] = []

    def target() -> None:
        try:
            outcome.append((action(), None))
        except BaseException as exc:
            outcome.append((None, exc))

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(BOUND)
    assert not thread.is_alive(), "the generator blocked"
    return outcome[0]


def snapshot(tree: Path) -> dict[str, str]:
    """Every entry below ``tree`` with its kind and content (links are not followed)."""
    found: dict[str, str] = {}
    for path in sorted(tree.rglob("*")):
        key = str(path.relative_to(tree))
        if path.is_symlink():
            found[key] = f"link -> {os.readlink(path)}"
        elif path.is_fifo():
            found[key] = "fifo"
        elif path.is_file():
            found[key] = path.read_text()
        else:
            found[key] = "dir"
    return found


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A host directory holding a package that looks generated (so replacing or removing it is allowed)."""
    path = tmp_path / "outside"
    (path / "s").mkdir(parents=True)
    (path / "s" / "__init__.py").write_text(GENERATED_INIT)
    (path / "__init__.py").write_text("# the host's own package\n")
    return path


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    path = tmp_path / "workspace"
    (path / "mcptools").mkdir(parents=True)
    (path / "mcptools" / "__init__.py").write_text(f'"""{MARKER}"""\n')
    return path


def plant_root_link(api: Path, outside: Path) -> None:
    (api / "__init__.py").unlink()
    api.rmdir()
    api.symlink_to(outside)


def plant_package_link(api: Path, outside: Path) -> None:
    (api / "s").symlink_to(outside / "s")


def plant_package_fifo(api: Path, outside: Path) -> None:
    os.mkfifo(api / "s")


def plant_init_link(api: Path, outside: Path) -> None:
    (api / "s").mkdir()
    (api / "s" / "__init__.py").symlink_to(outside / "s" / "__init__.py")


def plant_init_fifo(api: Path, outside: Path) -> None:
    (api / "s").mkdir()
    os.mkfifo(api / "s" / "__init__.py")


def plant_init_hard_link(api: Path, outside: Path) -> None:
    (api / "s").mkdir()
    os.link(outside / "s" / "__init__.py", api / "s" / "__init__.py")


def plant_root_init_link(api: Path, outside: Path) -> None:
    (api / "__init__.py").unlink()
    (api / "__init__.py").symlink_to(outside / "__init__.py")


def plant_root_init_fifo(api: Path, outside: Path) -> None:
    (api / "__init__.py").unlink()
    os.mkfifo(api / "__init__.py")


PLANTS = {
    "mcptools is a symlink": (plant_root_link, "mcptools: it is a symbolic link"),
    "mcptools/s is a symlink": (plant_package_link, "mcptools/s: it is a symbolic link"),
    "mcptools/s is a FIFO": (plant_package_fifo, "mcptools/s: it is a FIFO"),
    "mcptools/s/__init__.py is a symlink": (plant_init_link, "s/__init__.py: it is a symbolic link"),
    "mcptools/s/__init__.py is a FIFO": (plant_init_fifo, "s/__init__.py: it is a FIFO"),
    "mcptools/s/__init__.py is a hard link": (
        plant_init_hard_link,
        "s/__init__.py: it is a file with 2 hard",
    ),
    "mcptools/__init__.py is a symlink": (
        plant_root_init_link,
        "mcptools/__init__.py: it is a symbolic link",
    ),
    "mcptools/__init__.py is a FIFO": (plant_root_init_fifo, "mcptools/__init__.py: it is a FIFO"),
}


@pytest.mark.parametrize("plant", PLANTS)
def test_planted_entries_are_refused_and_nothing_outside_changes(
    plant: str, workspace: Path, outside: Path
) -> None:
    api = workspace / "mcptools"
    setup, message = PLANTS[plant]
    setup(api, outside)
    before_outside, before_api = snapshot(outside), snapshot(api) if not api.is_symlink() else {}

    _, error = bounded(lambda: generate_server_package("s", [ToolInfo(name="fresh_tool")], api))
    assert isinstance(error, UnsafePathError), error
    assert message in str(error) and "refusing" in str(error) and "\n" not in str(error)

    removed, error = bounded(lambda: remove_server_package("s", api))
    if plant.startswith("mcptools/__init__.py"):
        assert (removed, error) == (False, None)  # no package to remove; the root's file is not read
    else:
        assert isinstance(error, UnsafePathError) and message in str(error), error

    assert snapshot(outside) == before_outside
    if before_api:
        assert snapshot(api) == before_api  # the plant stays; nothing was added or removed


def test_control_plain_writes_follow_a_planted_symlink(workspace: Path, outside: Path) -> None:
    """What the generator did before (``mkdtemp``/``write_text`` below the root) lands outside."""
    plant_root_link(workspace / "mcptools", outside)
    (workspace / "mcptools" / "s" / "_base.py").write_text("# planted by the sandbox's choice\n")
    assert (outside / "s" / "_base.py").exists()


def test_control_plain_read_of_a_planted_fifo_blocks(workspace: Path, outside: Path) -> None:
    """The old ``is_generated`` read ``mcptools/s/__init__.py`` with ``read_text``: a FIFO blocks it."""
    plant_init_fifo(workspace / "mcptools", outside)
    fifo = workspace / "mcptools" / "s" / "__init__.py"
    assert blocks_on_fifo(fifo, fifo.read_text)


def test_generation_still_works_below_a_symlinked_workspace_path(tmp_path: Path) -> None:
    """The user's own symlinks above the root (the workspace's parent) are trusted and followed."""
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "alias").symlink_to(real)
    package = generate_server_package("s", [ToolInfo(name="t")], tmp_path / "alias" / "mcptools")
    assert (real / "mcptools" / "s" / "_tools" / "t.py").is_file()
    assert package.path == tmp_path / "alias" / "mcptools" / "s"
    assert remove_server_package("s", tmp_path / "alias" / "mcptools") is True
    assert sorted(p.name for p in (real / "mcptools").iterdir()) == ["__init__.py"]
