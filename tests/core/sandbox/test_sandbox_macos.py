"""macOS backend, checked as generated text (it cannot run on the Linux CI; see ipybox_core.sandbox.macos)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from ipybox_core.errors import ConfigError, SandboxUnavailable
from ipybox_core.kernel.launcher import LaunchSpec
from ipybox_core.sandbox import (
    SandboxPolicy,
    SeatbeltLauncher,
    SeatbeltProfile,
    SrtSettings,
    sandbox_launcher,
)
from ipybox_core.sandbox.macos import _name_regex


@pytest.fixture
def dirs(tmp_path: Path) -> dict[str, Path]:
    paths = {name: tmp_path / name for name in ("home", "ws", "rt", "rt/tmp", "py")}
    for path in paths.values():
        path.mkdir(exist_ok=True)
    return paths


def profile(dirs: dict[str, Path], policy: SandboxPolicy | None = None, port: int | None = None) -> str:
    policy = policy or SandboxPolicy(home=dirs["home"])
    return SeatbeltProfile(policy, dirs["ws"], dirs["rt"], dirs["rt/tmp"], [dirs["py"]], port).render()


def line_with(text: str, start: str) -> tuple[int, str]:
    lines = text.splitlines()
    index = next(i for i, line in enumerate(lines) if line.startswith(start))
    return index, lines[index]


def test_profile_denies_by_default_and_allows_the_workspace(dirs: dict[str, Path]) -> None:
    text = profile(dirs)
    assert text.startswith("(version 1)\n(deny default)\n")
    _, writes = line_with(text, "(allow file-write* (subpath")
    for name in ("ws", "rt", "rt/tmp"):
        assert f'(subpath "{os.path.realpath(dirs[name])}")' in writes
    assert str(dirs["py"]) not in writes
    _, reads = line_with(text, "(allow file-read* (subpath")
    assert f'(subpath "{dirs["py"]}")' in reads and f'(subpath "{dirs["ws"]}")' in reads


def test_user_data_is_closed_then_the_allow_list_reopened_then_secrets_hidden(dirs: dict[str, Path]) -> None:
    text = profile(dirs)
    deny_users, deny_line = line_with(text, "(deny file-read* (subpath")
    allow_list, _ = line_with(text, "(allow file-read* (subpath")
    hide, hide_line = line_with(text, "(deny file-read* file-write*")
    assert '(subpath "/Users")' in deny_line and '(subpath "/private/var/folders")' in deny_line
    assert deny_users < allow_list < hide  # Seatbelt: the last matching rule wins
    assert f'(subpath "{dirs["home"]}/.ssh")' in hide_line
    assert '(subpath "/etc/shadow")' in hide_line
    assert '(regex #"/\\.env$")' in hide_line and '(regex #"/\\.env\\.[^/]*$")' in hide_line


def test_only_runtime_dir_unix_sockets_and_no_network_by_default(dirs: dict[str, Path]) -> None:
    text = profile(dirs)
    runtime = f'(subpath "{dirs["rt"]}")'
    assert f"(allow network-outbound (remote unix-socket {runtime}))" in text
    assert f"(allow network-bind network-inbound (local unix-socket {runtime}))" in text
    assert "network*" not in text and "remote ip" not in text and "tcp" not in text


def test_extra_sockets_are_allowed_by_literal_path(dirs: dict[str, Path], tmp_path: Path) -> None:
    tools = tmp_path / "tools.sock"
    policy = SandboxPolicy(home=dirs["home"])
    text = SeatbeltProfile(policy, dirs["ws"], dirs["rt"], dirs["rt/tmp"], sockets=[tools]).render()
    assert f'(allow network-outbound (remote unix-socket (literal "{tools}")))' in text


def test_network_modes(dirs: dict[str, Path]) -> None:
    assert "(allow network* system-socket)" in profile(dirs, SandboxPolicy(home=dirs["home"], network=True))
    proxied = profile(dirs, SandboxPolicy(home=dirs["home"], allow_hosts=("pypi.org",)), port=43210)
    assert '(allow network-outbound (remote ip "localhost:43210"))' in proxied
    assert "network*" not in proxied


def test_paths_are_quoted(dirs: dict[str, Path], tmp_path: Path) -> None:
    odd = tmp_path / 'we"ird\\dir'
    odd.mkdir()
    text = profile(dirs, SandboxPolicy(home=dirs["home"], allow_read=(odd,)))
    assert '(subpath "' + str(odd).replace("\\", "\\\\").replace('"', '\\"') + '")' in text


@pytest.mark.parametrize(
    ("pattern", "regex"),
    [
        (".env", '(regex #"/\\.env$")'),
        ("*.pem", '(regex #"/[^/]*\\.pem$")'),
        ("id_?sa", '(regex #"/id_[^/]sa$")'),
    ],
)
def test_name_patterns_become_regexes(pattern: str, regex: str) -> None:
    assert _name_regex(pattern) == regex


def test_srt_settings(dirs: dict[str, Path]) -> None:
    policy = SandboxPolicy(home=dirs["home"], allow_hosts=("pypi.org",), allow_write=(dirs["py"],))
    settings = SrtSettings(policy, dirs["ws"], dirs["rt"], dirs["rt/tmp"], [dirs["py"]]).to_dict()
    assert settings["network"] == {
        "allowedDomains": ["pypi.org"],
        "deniedDomains": [],
        "allowUnixSockets": [os.path.realpath(dirs["rt"])],
        "allowLocalBinding": False,
    }
    filesystem = settings["filesystem"]
    assert "/Users" in filesystem["denyRead"] and "**/.env" in filesystem["denyRead"]
    assert (
        f"{dirs['home']}/.ssh" in filesystem["denyRead"] and f"{dirs['home']}/.ssh" in filesystem["denyWrite"]
    )
    assert set(filesystem["allowWrite"]) == {
        os.path.realpath(dirs[name]) for name in ("ws", "rt", "rt/tmp", "py")
    }
    assert os.path.realpath(dirs["py"]) in filesystem["allowRead"]
    assert json.loads(SrtSettings(policy, dirs["ws"], dirs["rt"], dirs["rt/tmp"]).to_json())["network"]
    with pytest.raises(ConfigError, match="network=True"):
        SrtSettings(SandboxPolicy(network=True), dirs["ws"], dirs["rt"], dirs["rt/tmp"]).to_dict()


def test_srt_command_quotes_the_argv_into_one_string() -> None:
    command = SrtSettings.command(Path("/s.json"), ["python", "-c", "print('a b')"])
    assert command == ["srt", "--settings", "/s.json", "-c", "python -c 'print('\"'\"'a b'\"'\"')'"]


def test_seatbelt_launcher_wraps_with_sandbox_exec(dirs: dict[str, Path]) -> None:
    launcher = SeatbeltLauncher(
        SandboxPolicy(home=dirs["home"], allow_hosts=("pypi.org",)), workspace=dirs["ws"], probe=False
    )
    spec = LaunchSpec(
        argv=[sys.executable, "-m", "ipykernel_launcher", "-f", "k.json"],
        env={"PATH": os.defpath, "JPY_PARENT_PID": "1", "TOKEN": "t"},
        cwd=dirs["ws"],
        runtime_dir=dirs["rt"],
    )
    try:
        wrapped = launcher.wrap(spec)
        assert wrapped.argv[:2] == ["/usr/bin/sandbox-exec", "-p"]
        assert "(deny default)" in wrapped.argv[2] and "localhost:" in wrapped.argv[2]
        assert wrapped.argv[3] == sys.executable and wrapped.argv[4] == "-c"
        assert wrapped.env["HOME"] == str(dirs["rt"] / "home") and wrapped.env["TMPDIR"] == str(
            dirs["rt"] / "tmp"
        )
        assert wrapped.env["HTTPS_PROXY"].startswith("http://127.0.0.1:") and wrapped.env["TOKEN"] == "t"
        assert "JPY_PARENT_PID" not in wrapped.env and launcher.interrupt_mode == "message"
    finally:
        launcher.close()


def test_macos_without_sandbox_exec_is_reported(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(sys, "platform", "darwin")
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(SandboxUnavailable, match="sandbox-exec"):
        sandbox_launcher(SandboxPolicy(), workspace=tmp_path)
