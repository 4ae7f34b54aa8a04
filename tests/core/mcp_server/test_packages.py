"""``install_package``: only requirements reach pip, never options; timeouts stop pip."""

from __future__ import annotations

import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ipybox_core.errors import ConfigError
from ipybox_core.mcp_server import packages
from ipybox_core.mcp_server.packages import install_requirements, pip_command, validate_requirements


@pytest.mark.parametrize(
    "spec",
    [
        "httpx",
        "pandas>=2,<3",
        "requests[socks]==2.32.3",
        "name @ https://example.com/name-1.0.tar.gz",
        'tomli; python_version < "3.11"',
    ],
)
def test_requirements_are_accepted(spec: str) -> None:
    assert validate_requirements([spec]) == [spec]


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("--index-url=https://evil.example/simple", "looks like a pip option"),
        ("-e .", "looks like a pip option"),
        (" -rrequirements.txt", "looks like a pip option"),
        ("", "empty package name"),
        ("pkg\n--extra-index-url=x", "control characters"),
        ("pkg; rm -rf /", "invalid package requirement"),
        ("./local/dir", "invalid package requirement"),
    ],
)
def test_anything_but_a_requirement_is_refused(spec: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        validate_requirements([spec])


def test_counts_are_checked() -> None:
    with pytest.raises(ConfigError, match="no packages"):
        validate_requirements([])
    with pytest.raises(ConfigError, match="at most"):
        validate_requirements(["a"] * (packages.MAX_REQUIREMENTS + 1))


def test_pip_command_uses_the_kernels_interpreter_in_isolated_mode() -> None:
    command = pip_command(sys.executable)
    assert command[:6] == [sys.executable, "-I", "-u", "-m", "pip", "install"]


def test_without_pip_uv_is_used_without_config_discovery(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    python = str(tmp_path / "bin" / "python")  # an environment without a pip script next to it
    monkeypatch.setattr(packages, "host_which", lambda name: "/opt/uv" if name == "uv" else None)
    assert pip_command(python) == ["/opt/uv", "pip", "install", "--no-config", "--python", python]


@pytest.fixture
def silent_http_server() -> Iterator[str]:
    """A TCP port that accepts connections and never answers."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        yield f"http://127.0.0.1:{server.getsockname()[1]}/probe-0.1-py3-none-any.whl"


async def test_a_hanging_install_is_stopped_at_the_timeout(silent_http_server: str) -> None:
    result = await install_requirements([f"probe @ {silent_http_server}"], timeout=1)
    assert result.timed_out and result.returncode is None and not result.ok


async def test_invalid_requirements_run_nothing() -> None:
    with pytest.raises(ConfigError):
        await install_requirements(["--pre", "httpx"])
