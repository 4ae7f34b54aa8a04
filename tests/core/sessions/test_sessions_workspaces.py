"""Where sessions work: names that reveal no key, a root only the host writes, workspaces the host
made and moved into place (anything else at a key's name is refused, never followed), and a kept
workspace that a kernel of another sandbox uid can still write."""

from __future__ import annotations

import os
import secrets
import stat
from pathlib import Path

import pytest

from core.sessions.test_sessions_backends import require_bwrap
from ipybox_core import ConfigError, Sessions
from ipybox_core.errors import UnsafePathError
from ipybox_core.sandbox import ResourceLimits, SandboxPolicy
from ipybox_core.sandbox._uids import lease_uid
from ipybox_core.sessions import _workspaces
from ipybox_core.sessions._workspaces import NAMES_FILE, WorkspaceRoot, legacy_name
from prerequisites import require


def _name_of(root: Path, key: str) -> str:
    opened = WorkspaceRoot.open(root, legacy_names=False)
    try:
        return opened.name_of(key)
    finally:
        opened.close()


async def test_names_reveal_no_key_and_a_kept_root_finds_its_workspaces_again(tmp_path: Path) -> None:
    root = tmp_path / "root"
    async with Sessions(root=root, warm=0, approval="never") as sessions:
        first = await sessions.session("alice@example.com")
        await first.executor.execute("open('notes.txt', 'w').write('kept')")
        name = first.workspace.name
    assert "alice" not in name and "example" not in name
    assert name != legacy_name("alice@example.com")
    assert stat.S_IMODE((root / NAMES_FILE).stat().st_mode) == 0o600
    async with Sessions(root=root, warm=1, approval="never") as sessions:
        again = await sessions.session("alice@example.com")
        assert again.workspace.name == name
        assert (await again.executor.execute("print(open('notes.txt').read())")).text.strip() == "kept"
    other_root = tmp_path / "other"
    assert _name_of(other_root, "alice@example.com") != name  # another root, another secret


async def test_a_workspace_of_the_old_naming_is_found_again(tmp_path: Path) -> None:
    root = tmp_path / "root"
    old = root / legacy_name("bob")
    old.mkdir(parents=True)
    (old / "old.txt").write_text("from before")
    async with Sessions(root=root, warm=1, approval="never") as sessions:
        bob = await sessions.session("bob")
        assert bob.workspace.name != old.name
        assert (await bob.executor.execute("print(open('old.txt').read())")).text.strip() == "from before"
    assert not old.exists()


@pytest.mark.parametrize("planted", ["symlink", "file"])
async def test_a_planted_entry_at_a_keys_name_is_refused_and_never_followed(
    tmp_path: Path, planted: str
) -> None:
    root = tmp_path / "root"
    elsewhere = tmp_path / "elsewhere"  # what a link would lead the host to
    elsewhere.mkdir()
    (elsewhere / "secret.txt").write_text("host secret")
    target = root / _name_of(root, "carol")
    if planted == "symlink":
        target.symlink_to(elsewhere)
    else:
        target.write_text("not a workspace")
    async with Sessions(root=root, warm=1, approval="never") as sessions:
        with pytest.raises(UnsafePathError, match="refusing"):
            await sessions.session("carol")
        assert sessions.live == 0
    assert (elsewhere / "secret.txt").read_text() == "host secret"  # nothing was moved out of it
    assert target.is_symlink() if planted == "symlink" else target.is_file()
    assert not list(root.glob(".warm-*"))  # the executor's directory went with it

    # control: the merge of before (by path, following the link) moves the host's file into the
    # directory the conversation's kernel works in
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    if planted == "symlink":
        _old_merge(target, workspace)
        assert (workspace / "secret.txt").read_text() == "host secret"


def _old_merge(target: Path, source: Path) -> None:
    """``_adopt_workspace`` before issue 22 (less the final rename)."""
    if target.is_dir():
        for entry in os.listdir(target):
            os.rename(target / entry, source / entry)


def test_a_root_others_can_write_or_another_user_owns_is_refused(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    with pytest.raises(ConfigError, match="writable by no one else"):
        WorkspaceRoot.open(shared, legacy_names=True)
    if os.geteuid() == 0:
        foreign = tmp_path / "foreign"
        foreign.mkdir()
        os.chown(foreign, 4242, 4242)
        with pytest.raises(ConfigError, match="must belong to this user"):
            WorkspaceRoot.open(foreign, legacy_names=True)


@pytest.mark.parametrize("given", [True, False], ids=["files-given", "control-not-given"])
async def test_a_kept_workspace_stays_writable_under_the_next_kernels_uid(
    tmp_path: Path, given: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    require_bwrap()
    require(os.geteuid() == 0, "sandbox uids are used when the application runs as root")
    base = 1_500_000_000 + secrets.randbelow(400_000_000)
    policy = SandboxPolicy(limits=ResourceLimits(max_processes=64), sandbox_uid=base, sandbox_uids=8)
    if not given:  # control: the files keep the earlier kernel's uid
        monkeypatch.setattr(_workspaces, "give_tree", lambda *args: 0)
    async with Sessions(root=tmp_path / "root", warm=0, sandbox=policy, approval="never") as sessions:
        first = await sessions.session("dave")
        made = await first.executor.execute(
            "import os\nos.makedirs('deep/er')\nopen('deep/er/notes.txt', 'w').write('1')\nprint(os.getuid())"
        )
        first_uid = int(made.text)
        await sessions.close_session("dave")
        held = lease_uid(base, 8, owner=first_uid)  # the next kernel of dave gets another uid
        try:
            second = await sessions.session("dave")
            wrote = await second.executor.execute(
                "import os\nopen('deep/er/notes.txt', 'a').write('2')\nos.mkdir('deep/er/more')\n"
                "print(os.getuid(), open('deep/er/notes.txt').read())"
            )
        finally:
            held.release()
    if not given:
        assert wrote.error is not None and "PermissionError" in repr(wrote.error), wrote
        return
    assert wrote.error is None, wrote.text
    second_uid, content = wrote.text.split()
    assert int(second_uid) != first_uid and content == "12"
