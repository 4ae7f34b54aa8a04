"""The sandbox's file system plan: allow-listed binds, hidden paths, mount order (no bwrap needed)."""

from __future__ import annotations

import dataclasses
import os
import socket
import sys
from pathlib import Path

import pytest

from ipybox_core.errors import SandboxError
from ipybox_core.kernel.launcher import LaunchSpec
from ipybox_core.sandbox import SandboxPolicy
from ipybox_core.sandbox._mounts import SANDBOX_HOME, FilesystemPlan, plan_filesystem


@pytest.fixture
def dirs(tmp_path: Path) -> dict[str, Path]:
    paths = {name: tmp_path / name for name in ("home", "ws", "rt", "elsewhere")}
    for path in paths.values():
        path.mkdir()
    (paths["rt"] / "kernel.1").mkdir()
    return paths


def spec_for(dirs: dict[str, Path], cwd: Path | None = None) -> LaunchSpec:
    argv = [sys.executable, "-m", "ipykernel_launcher", "-f", str(dirs["rt"] / "kernel.json")]
    return LaunchSpec(
        argv=argv,
        env={"PATH": os.defpath},
        cwd=cwd or dirs["ws"],
        runtime_dir=dirs["rt"],
        ipc_dir=dirs["rt"] / "kernel.1",
    )


def plan(dirs: dict[str, Path], policy: SandboxPolicy | None = None, **spec: Path) -> FilesystemPlan:
    policy = policy or SandboxPolicy(home=dirs["home"])
    return plan_filesystem(policy, workspace=dirs["ws"], spec=spec_for(dirs, **spec))


def hidden_paths(result: FilesystemPlan) -> set[Path]:
    return {hidden.path for hidden in result.hidden}


def test_only_the_allow_list_is_visible(dirs: dict[str, Path]) -> None:
    result = plan(dirs)
    assert result.is_writable(dirs["ws"]) and result.is_writable(dirs["rt"] / "kernel.1")
    assert not result.is_visible(dirs["rt"]) and not result.is_visible(dirs["rt"] / "kernel.json")
    assert result.is_visible(Path("/usr/lib")) and not result.is_writable(Path("/usr/lib"))
    assert result.is_visible(Path("/etc/hostname")) and not result.is_writable(Path("/etc"))
    for prefix in {Path(sys.prefix).resolve(), Path(sys.base_prefix).resolve()}:
        assert result.is_visible(prefix) and not result.is_writable(prefix)
    assert not result.is_visible(dirs["home"]) and not result.is_visible(dirs["elsewhere"])
    assert not result.is_visible(Path("/home")) and not result.is_visible(Path("/var"))
    assert not result.is_visible(Path("/run")) and not result.is_visible(Path("/sys"))
    assert result.home == SANDBOX_HOME


def test_python_import_paths_of_pth_files_are_visible(dirs: dict[str, Path]) -> None:
    import ipybox_core

    source = Path(ipybox_core.__file__).resolve().parent.parent
    assert plan(dirs).is_visible(source)


def test_secrets_in_the_workspace_are_hidden_by_name(dirs: dict[str, Path]) -> None:
    ws = dirs["ws"]
    (ws / "sub" / "deeper").mkdir(parents=True)
    for skipped_once in ("node_modules/pkg", ".git/hooks", "__pycache__"):
        (ws / skipped_once).mkdir(parents=True)
    names = ("node_modules/pkg/.env", ".git/hooks/.env", "__pycache__/.netrc")
    for name in (".env", "sub/deeper/.env", ".env.local", ".netrc", "notes.env", *names):
        (ws / name).write_text("x")
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(ws / "agent.sock"))
    try:
        hidden = hidden_paths(plan(dirs))
    finally:
        listener.close()
    assert {
        ws / ".env",
        ws / "sub/deeper/.env",
        ws / ".env.local",
        ws / ".netrc",
        ws / "agent.sock",
        *(ws / name for name in names),  # no directory is skipped by its name
    } <= hidden
    assert ws / "notes.env" not in hidden


def test_an_allowed_home_keeps_its_secrets_hidden(dirs: dict[str, Path]) -> None:
    home = dirs["home"]
    (home / ".ssh").mkdir()
    (home / ".ssh" / "id_rsa").write_text("key")
    (home / ".netrc").write_text("secret")
    (home / "notes.txt").write_text("fine")
    result = plan(dirs, SandboxPolicy(home=home, allow_read=(Path("~"),)))
    hidden = {(item.path, item.directory) for item in result.hidden}
    assert (home / ".ssh", True) in hidden and (home / ".netrc", False) in hidden
    assert result.is_visible(home / "notes.txt") and not result.is_visible(home / ".ssh" / "id_rsa")
    assert result.home == home


def test_a_symlinked_workspace_is_masked_in_both_views(dirs: dict[str, Path], tmp_path: Path) -> None:
    (dirs["ws"] / ".env").write_text("x")
    link = tmp_path / "ws-link"
    link.symlink_to(dirs["ws"])
    policy = SandboxPolicy(home=dirs["home"])
    spec = spec_for(dirs, cwd=link)
    result = plan_filesystem(policy, workspace=link, spec=spec)
    assert result.is_writable(link) and result.is_writable(dirs["ws"])
    assert {link / ".env", dirs["ws"] / ".env"} <= hidden_paths(result)


def test_masks_never_land_on_symlinks(dirs: dict[str, Path]) -> None:
    home, ws = dirs["home"], dirs["ws"]
    (home / ".ssh").mkdir()
    (home / ".ssh" / "id_rsa").write_text("key")
    (ws / ".env").symlink_to(home / ".ssh" / "id_rsa")
    hidden = hidden_paths(plan(dirs, SandboxPolicy(home=home, allow_read=(home,))))
    assert ws / ".env" not in hidden
    assert home / ".ssh" in hidden


def test_private_system_files_are_hidden_when_running_as_root(
    dirs: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    system = tmp_path / "system"
    (system / "private-dir").mkdir(parents=True)
    for name, mode in (("public.conf", 0o644), ("secret.key", 0o600), ("group-only", 0o640)):
        (system / name).write_text("x")
        (system / name).chmod(mode)
    (system / "private-dir").chmod(0o700)
    policy = SandboxPolicy(
        home=dirs["home"], system_paths=(system, Path("/usr")), private_file_scan=(system,)
    )
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    hidden = hidden_paths(plan(dirs, policy))
    assert {system / "secret.key", system / "group-only", system / "private-dir"} <= hidden
    assert system / "public.conf" not in hidden
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert not hidden_paths(plan(dirs, policy)) & {system / "secret.key", system / "private-dir"}


# A platform condition, not a prerequisite: macOS has no /etc/shadow, every Linux system has one.
@pytest.mark.skipif(not Path("/etc/shadow").exists(), reason="this system has no /etc/shadow")
def test_etc_shadow_is_hidden(dirs: dict[str, Path]) -> None:
    assert Path("/etc/shadow") in hidden_paths(plan(dirs))


def test_extra_paths_read_only_and_writable(dirs: dict[str, Path]) -> None:
    data = dirs["elsewhere"] / "data"
    data.mkdir()
    (dirs["ws"] / "frozen").mkdir()
    policy = SandboxPolicy(home=dirs["home"], allow_read=(data, Path("frozen"), Path("/usr/share")))
    result = plan(dirs, policy)
    assert result.is_visible(data) and not result.is_writable(data)
    assert result.is_visible(dirs["ws"] / "frozen") and not result.is_writable(dirs["ws"] / "frozen")
    assert not any(bind.path == Path("/usr/share") for bind in result.binds)  # /usr already shows it
    writable = plan(dirs, SandboxPolicy(home=dirs["home"], allow_write=(data,)))
    assert writable.is_writable(data)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"allow_read": ("/does/not/exist",)}, "allow_read path /does/not/exist does not exist"),
        ({"allow_write": ("/proc/self",)}, "private to the sandbox"),
        ({"allow_write": ("/tmp",)}, "private to the sandbox"),
        ({"allow_write": ("/",)}, "contains the system directory"),
        ({"extra_hidden_paths": ("../rt",)}, "kernel socket directory .* would be invisible"),
    ],
)
def test_impossible_plans_raise(dirs: dict[str, Path], fields: dict[str, object], message: str) -> None:
    with pytest.raises(SandboxError, match=message):
        plan(dirs, SandboxPolicy.model_validate({"home": dirs["home"], **fields}))


def test_allowed_sockets_are_shown_and_never_masked(dirs: dict[str, Path]) -> None:
    inside, outside = dirs["ws"] / "tools.sock", dirs["elsewhere"] / "tools.sock"
    listeners = [socket.socket(socket.AF_UNIX), socket.socket(socket.AF_UNIX)]
    try:
        listeners[0].bind(str(inside))
        listeners[1].bind(str(outside))
        policy = SandboxPolicy(home=dirs["home"])
        result = plan_filesystem(policy, workspace=dirs["ws"], spec=spec_for(dirs), sockets=[inside, outside])
        assert result.is_visible(inside) and result.is_visible(outside)
        assert not result.is_visible(dirs["elsewhere"] / "other") and not result.is_writable(outside)
        assert inside not in hidden_paths(result)
    finally:
        for listener in listeners:
            listener.close()
    (dirs["elsewhere"] / "plain").write_text("x")
    with pytest.raises(SandboxError, match="is not a unix socket"):
        plan_filesystem(
            policy, workspace=dirs["ws"], spec=spec_for(dirs), sockets=[dirs["elsewhere"] / "plain"]
        )


def test_working_directory_must_be_visible(dirs: dict[str, Path]) -> None:
    with pytest.raises(SandboxError, match="kernel working directory"):
        plan(dirs, cwd=dirs["elsewhere"])


def test_bwrap_arguments_mount_in_a_safe_order(dirs: dict[str, Path]) -> None:
    (dirs["ws"] / ".env").write_text("x")
    args = plan(dirs).bwrap_args(Path("/deny"))
    tmpfs_tmp = args.index("/tmp", args.index("--tmpfs") if "--tmpfs" in args else 0)
    workspace_bind = args.index(str(dirs["ws"]))
    env_mask = args.index(str(dirs["ws"] / ".env"))
    assert tmpfs_tmp < workspace_bind < env_mask
    assert args[args.index("--proc") + 1 : args.index("--proc") + 4] == ["/proc", "--remount-ro", "/proc"]
    assert args[-2:] == ["--remount-ro", "/"]
    assert args[env_mask - 2 : env_mask] == ["--ro-bind", "/deny"]
    assert "--size" in args


def test_only_the_kernels_socket_dir_and_start_files_of_the_runtime_dir_are_visible(
    dirs: dict[str, Path],
) -> None:
    """Another kernel's connection file (or anything else the host keeps there) stays hidden."""
    ipc_dir = dirs["rt"] / "kernel-ab.1"
    ipc_dir.mkdir()
    own = dirs["rt"] / "kernel-ab.json"
    own.write_text("{}")
    other = dirs["rt"] / "kernel-other.json"
    other.write_text('{"key": "secret"}')
    spec = dataclasses.replace(spec_for(dirs), ipc_dir=ipc_dir, kernel_files=(own,))
    plan = plan_filesystem(SandboxPolicy(home=dirs["home"]), workspace=dirs["ws"], spec=spec)
    assert plan.is_writable(ipc_dir)
    assert plan.is_visible(own) and not plan.is_writable(own)
    assert not plan.is_visible(other)
    assert not plan.is_visible(dirs["rt"] / "tools.sock")
