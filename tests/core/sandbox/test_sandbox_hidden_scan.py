"""The scan for hidden paths decides by what a path is, within a bound (plans only, no bwrap).

Each property is checked with its control: the same tree under the old scan (directories skipped by
name, no identities) or with the mechanism switched off shows the path, so each check can fail.
The attacks on a real sandbox are in ``test_sandbox_hidden_relaunch.py``.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Collection
from pathlib import Path

import pytest
from hidden_scan_kit import old_scan

from ipybox_core.kernel.launcher import LaunchSpec
from ipybox_core.sandbox import SandboxPolicy, _mounts
from ipybox_core.sandbox._mounts import MAX_MASKS, FilesystemPlan, plan_filesystem
from ipybox_core.sandbox._scan import FileId, HiddenScanGaveUp, ScanBound, scan_user_trees


@pytest.fixture
def dirs(tmp_path: Path) -> dict[str, Path]:
    paths = {name: tmp_path / name for name in ("home", "ws", "rt")}
    for path in paths.values():
        path.mkdir()
    (paths["rt"] / "kernel.1").mkdir()
    return paths


def plan(
    dirs: dict[str, Path], policy: SandboxPolicy | None = None, known: Collection[FileId] = frozenset()
) -> FilesystemPlan:
    spec = LaunchSpec(
        argv=[sys.executable, "-m", "ipykernel_launcher"],
        env={"PATH": os.defpath},
        cwd=dirs["ws"],
        runtime_dir=dirs["rt"],
        ipc_dir=dirs["rt"] / "kernel.1",
    )
    policy = policy or SandboxPolicy(home=dirs["home"])
    return plan_filesystem(policy, workspace=dirs["ws"], spec=spec, known_hidden=known)


def visible(result: FilesystemPlan, path: Path) -> bool:
    return result.is_visible(path)


def test_a_secret_under_a_once_skipped_directory_is_hidden(
    dirs: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    ws = dirs["ws"]
    for name in ("node_modules/.env", ".git/.env.production", "a/__pycache__/.netrc"):
        (ws / name).parent.mkdir(parents=True, exist_ok=True)
        (ws / name).write_text("secret")
    result = plan(dirs)
    assert not any(visible(result, ws / name) for name in ("node_modules/.env", ".git/.env.production"))
    assert not visible(result, ws / "a/__pycache__/.netrc")
    monkeypatch.setattr(_mounts, "scan_user_trees", old_scan)  # control: the old scan misses them all
    weak = plan(dirs)
    assert visible(weak, ws / "node_modules/.env") and visible(weak, ws / "a/__pycache__/.netrc")


def test_every_name_of_a_hidden_file_is_hidden(
    dirs: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Hard links made on the host (the sandbox cannot make one: the name it would link is a mount)."""
    ws = dirs["ws"]
    (ws / "config").mkdir()
    (ws / ".env").write_text("secret")
    os.link(ws / ".env", ws / "config" / "settings.txt")
    (ws / "vault").mkdir()
    (ws / "vault" / "token").write_text("secret")
    os.link(ws / "vault" / "token", ws / "config" / "token-copy")
    (ws / "plain.txt").write_text("fine")
    os.link(ws / "plain.txt", ws / "config" / "plain-copy")
    policy = SandboxPolicy(home=dirs["home"], extra_hidden_paths=("vault",))
    result = plan(dirs, policy)
    assert not visible(result, ws / "config" / "settings.txt")
    assert not visible(result, ws / "config" / "token-copy")  # a link into a hidden directory's file
    assert visible(result, ws / "config" / "plain-copy") and visible(result, ws / "plain.txt")
    monkeypatch.setattr(_mounts, "scan_user_trees", old_scan)
    weak = plan(dirs, policy)
    assert visible(weak, ws / "config" / "settings.txt") and visible(weak, ws / "config" / "token-copy")


def test_a_hidden_identity_is_hidden_wherever_it_was_moved(dirs: dict[str, Path]) -> None:
    """What one launch hid, the next hides again at its new path (``known_hidden``)."""
    ws = dirs["ws"]
    (ws / "keys").mkdir()
    (ws / "keys" / "token.txt").write_text("secret")
    (ws / ".env").symlink_to(ws / "keys" / "token.txt")
    first = plan(dirs)
    assert not visible(first, ws / "keys" / "token.txt")
    (ws / ".env").unlink()  # what sandboxed code can do: re-point the link, rename the directory
    os.rename(ws / "keys", ws / "elsewhere")
    again = plan(dirs, known=first.hidden_ids)
    assert not visible(again, ws / "elsewhere" / "token.txt")
    assert visible(plan(dirs), ws / "elsewhere" / "token.txt")  # control: without the identities


def test_explicit_hidden_paths_in_writable_trees_are_pinned(dirs: dict[str, Path]) -> None:
    ws, home = dirs["ws"], dirs["home"]
    (ws / "a" / "b").mkdir(parents=True)
    (ws / "a" / "b" / "key.pem").write_text("secret")
    (home / ".config" / "gcloud").mkdir(parents=True)
    (ws / "top.key").write_text("secret")
    policy = SandboxPolicy(home=home, extra_hidden_paths=("a/b/key.pem", "top.key"), allow_read=(home,))
    result = plan(dirs, policy)
    assert {pin.path for pin in result.pins} == {ws / "a", ws / "a" / "b"}  # not in the read-only home
    assert all(pin.writable and pin.source == pin.path for pin in result.pins)
    args = result.bwrap_args(Path("/deny"))
    workspace_bind = args.index(str(ws))
    pin_a = args.index(str(ws / "a"))
    mask = args.index(str(ws / "a" / "b" / "key.pem"))
    assert workspace_bind < pin_a < mask
    assert args[pin_a - 1 : pin_a + 2] == ["--bind", str(ws / "a"), str(ws / "a")]
    assert not plan(dirs).pins  # control: nothing explicit in the workspace, nothing pinned


def test_the_scan_gives_up_at_its_entry_bound_and_logs_it(
    dirs: dict[str, Path], caplog: pytest.LogCaptureFixture
) -> None:
    for index in range(300):
        (dirs["ws"] / f"f{index}").touch()
    only_the_workspace = {"home": dirs["home"], "python_env": False}
    plan(dirs, SandboxPolicy(**only_the_workspace, hidden_scan_entries=300))  # control: within the bound
    with (
        caplog.at_level(logging.ERROR, logger="ipybox_core.sandbox._scan"),
        pytest.raises(HiddenScanGaveUp, match=r"gave up .* after 201 entries.*hidden_scan_entries=200"),
    ):
        plan(dirs, SandboxPolicy(**only_the_workspace, hidden_scan_entries=200))
    assert "hidden-path scan gave up" in caplog.text and "kernel is not started" in caplog.text


def test_the_scan_gives_up_at_its_time_bound(tmp_path: Path) -> None:
    for index in range(3000):
        (tmp_path / f"f{index}").touch()
    bound = ScanBound(entries=10**6, seconds=1e-9)
    with pytest.raises(HiddenScanGaveUp, match="hidden_scan_seconds=1e-09"):
        scan_user_trees([tmp_path], [".env"], known=(), bound=bound, max_found=10)
    assert (
        scan_user_trees([tmp_path], [".env"], known=(), bound=ScanBound(10**6, 60), max_found=10).entries
        == 3000
    )


def test_too_many_secrets_fail_closed(tmp_path: Path) -> None:
    bound = ScanBound(entries=10**6, seconds=60)
    for index in range(12):
        (tmp_path / str(index)).mkdir()
        (tmp_path / str(index) / ".env").touch()
    with pytest.raises(HiddenScanGaveUp, match="would hide more than 10 paths"):
        scan_user_trees([tmp_path], [".env"], known=(), bound=bound, max_found=10)
    assert len(scan_user_trees([tmp_path], [".env"], known=(), bound=bound, max_found=12).matches) == 12
    assert MAX_MASKS >= 1000


def test_what_lies_inside_a_found_directory_is_not_listed_again(tmp_path: Path) -> None:
    (tmp_path / ".env.d" / "deeper").mkdir(parents=True)
    for name in (".env", "deeper/.env", "deeper/x"):
        (tmp_path / ".env.d" / name).touch()
    found = scan_user_trees([tmp_path], [".env", ".env.*"], known=(), bound=ScanBound(100, 60), max_found=1)
    assert found.matches == [str(tmp_path / ".env.d")] and found.entries == 5


def test_a_planted_symlink_loop_named_like_a_secret_does_not_stop_the_launch(dirs: dict[str, Path]) -> None:
    ws = dirs["ws"]
    os.symlink(".env", ws / ".env")
    os.symlink(ws / ".env.b", ws / ".env.a")
    os.symlink(ws / ".env.a", ws / ".env.b")
    assert plan(dirs).is_writable(ws)
