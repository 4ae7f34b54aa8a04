"""The start-up probe: real bubblewrap passes; broken setups give errors that say why and how to fix."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from sandbox_kit import require_bwrap

from ipybox_core.errors import SandboxUnavailable
from ipybox_core.sandbox import BwrapLauncher, SandboxPolicy, probe, probe_sandbox, sandbox_launcher

UBUNTU = "bwrap: setting up uid map: Permission denied"
DOCKER = (
    "bwrap: No permissions to creating new namespace, likely because the kernel does not allow "
    "non-privileged user namespaces."
)
OLD = "bwrap: Unknown option --disable-userns"


def fake_bwrap(tmp_path: Path, stderr: str, code: int = 1) -> str:
    """An executable that logs each call and fails like a broken bubblewrap."""
    script = tmp_path / "bwrap"
    script.write_text(f"#!/bin/sh\necho called >> {tmp_path}/calls\necho '{stderr}' >&2\nexit {code}\n")
    script.chmod(0o755)
    return str(script)


@pytest.fixture
def no_hints(monkeypatch: pytest.MonkeyPatch) -> None:
    """A machine without tell-tale sysctls, not in a container."""
    monkeypatch.setattr(probe, "_sysctl", lambda name: None)
    monkeypatch.setattr(probe, "_in_container", lambda: False)


def test_real_bubblewrap_passes() -> None:
    require_bwrap()
    probe_sandbox(use_cache=False)
    assert isinstance(sandbox_launcher(SandboxPolicy(), workspace=Path.cwd()), BwrapLauncher)


def test_missing_bubblewrap_says_how_to_install(tmp_path: Path) -> None:
    with pytest.raises(SandboxUnavailable) as caught:
        probe_sandbox(bwrap=str(tmp_path / "no-such-bwrap"), use_cache=False)
    message = str(caught.value)
    assert (
        "not installed" in message and "apt-get install bubblewrap" in message and "sandbox=False" in message
    )


@pytest.mark.usefixtures("no_hints")
def test_ubuntu_apparmor_restriction_names_the_sysctl(tmp_path: Path) -> None:
    with pytest.raises(SandboxUnavailable) as caught:
        probe_sandbox(bwrap=fake_bwrap(tmp_path, UBUNTU), use_cache=False)
    message = str(caught.value)
    assert UBUNTU in message
    assert "sysctl -w kernel.apparmor_restrict_unprivileged_userns=0" in message
    assert "does not run code unsandboxed" in message


def test_ubuntu_restriction_is_recognised_from_the_sysctl(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sysctls = {"kernel/apparmor_restrict_unprivileged_userns": "1"}
    monkeypatch.setattr(probe, "_sysctl", sysctls.get)
    with pytest.raises(SandboxUnavailable, match="AppArmor"):
        probe_sandbox(bwrap=fake_bwrap(tmp_path, "bwrap: loopback: Failed RTM_NEWADDR"), use_cache=False)


def test_docker_seccomp_profile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(probe, "_sysctl", lambda name: None)
    monkeypatch.setattr(probe, "_in_container", lambda: True)
    with pytest.raises(SandboxUnavailable) as caught:
        probe_sandbox(bwrap=fake_bwrap(tmp_path, DOCKER), use_cache=False)
    assert "--security-opt seccomp=unconfined" in str(caught.value)


@pytest.mark.usefixtures("no_hints")
def test_namespaces_refused_outside_a_container(tmp_path: Path) -> None:
    with pytest.raises(SandboxUnavailable, match="max_user_namespaces"):
        probe_sandbox(bwrap=fake_bwrap(tmp_path, DOCKER), use_cache=False)


def test_disabled_user_namespaces(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(probe, "_sysctl", {"user/max_user_namespaces": "0"}.get)
    monkeypatch.setattr(probe, "_in_container", lambda: False)
    with pytest.raises(SandboxUnavailable, match=r"sysctl -w user\.max_user_namespaces=15000"):
        probe_sandbox(bwrap=fake_bwrap(tmp_path, DOCKER), use_cache=False)


@pytest.mark.usefixtures("no_hints")
def test_old_bubblewrap(tmp_path: Path) -> None:
    with pytest.raises(SandboxUnavailable, match=r"too old: ipybox needs bubblewrap >= 0\.8"):
        probe_sandbox(bwrap=fake_bwrap(tmp_path, OLD), use_cache=False)


@pytest.mark.usefixtures("no_hints")
def test_unknown_failure_shows_the_probe_command(tmp_path: Path) -> None:
    with pytest.raises(SandboxUnavailable) as caught:
        probe_sandbox(bwrap=fake_bwrap(tmp_path, "bwrap: something odd", code=7), use_cache=False)
    assert "exit code 7" in str(caught.value) and "--disable-userns" in str(caught.value)


@pytest.mark.usefixtures("no_hints")
def test_the_result_is_cached_per_bwrap_path(tmp_path: Path) -> None:
    bwrap = fake_bwrap(tmp_path, UBUNTU)
    for _ in range(3):
        with pytest.raises(SandboxUnavailable):
            probe_sandbox(bwrap=bwrap)
    assert (tmp_path / "calls").read_text().count("called") == 1


@pytest.mark.usefixtures("no_hints")
def test_launcher_refuses_to_start_without_a_working_sandbox(tmp_path: Path) -> None:
    with pytest.raises(SandboxUnavailable, match="apparmor"):
        BwrapLauncher(SandboxPolicy(), workspace=tmp_path, bwrap=fake_bwrap(tmp_path, UBUNTU))


def test_launcher_refuses_to_run_as_root_without_a_pids_cgroup(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    require_bwrap()
    monkeypatch.setattr("ipybox_core.sandbox.bwrap.available_controllers", set)
    monkeypatch.setattr("os.geteuid", lambda: 0)
    with pytest.raises(SandboxUnavailable, match="max_processes=None"):
        BwrapLauncher(SandboxPolicy(), workspace=tmp_path)
    BwrapLauncher(
        SandboxPolicy.model_validate({"limits": {"max_processes": None}}), workspace=tmp_path
    ).close()


def test_platform_without_a_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "platform", "win32")
    with pytest.raises(SandboxUnavailable, match="win32"):
        probe_sandbox(use_cache=False)
