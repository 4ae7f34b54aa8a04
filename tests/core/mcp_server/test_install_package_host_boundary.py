"""``install_package`` runs pip (or uv) on the host, as root when ipybox is root, and MCP stdio servers run
there too: sandboxed code must not be able to choose what they run. Each attack plants what the sandbox can write and has a control that
runs the tool the old way and shows the plant taking effect.

- A ``pip/`` package in the directory that was the server's working directory (``ipybox mcp
  --workspace .``): ``python -m pip`` used to import it (cwd first on ``sys.path``).
- A ``uv.toml`` there: ``uv pip`` used to read it (config discovery from cwd).
- A pip config in a home directory the sandbox can write, a wheel in the workspace, an interpreter in
  the workspace: refused before anything runs.
- A package shadowing an MCP stdio server's ``python -m`` module in ipybox's working directory.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters
from mcp_server_kit import ClientActor, build_probe_wheel, text_of

from ipybox_core import _host_process
from ipybox_core._host_process import mark_sandbox_writable
from ipybox_core.errors import ConfigError
from ipybox_core.mcp import McpRegistry
from ipybox_core.mcp_server.packages import install_requirements
from prerequisites import require

MISSING = "ipybox-no-such-probe"
"""A requirement pip cannot find with ``--no-index``: it fails fast, after importing its own code."""


def plant_pip(folder: Path, marker: Path) -> None:
    """What sandboxed code writes: a ``pip`` package whose ``__main__`` leaves ``marker`` (a host path)."""
    (folder / "pip").mkdir(parents=True)
    (folder / "pip" / "__init__.py").write_text("")
    (folder / "pip" / "__main__.py").write_text(plant_source(marker))


def naive_pip(cwd: Path, *args: str, python: str = sys.executable, **env: str) -> str:
    """The old way: ``python -m pip`` (no ``-I``) in ``cwd``."""
    done = subprocess.run(
        [python, "-m", "pip", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **env},
        check=False,
    )
    return done.stdout + done.stderr


@pytest.fixture
def marked(monkeypatch: pytest.MonkeyPatch) -> dict[str, bool]:
    """A clean registry of sandbox-writable trees for this test (its trees)."""
    registry = _host_process._Marked()
    monkeypatch.setattr(_host_process, "_marked", registry)
    return registry.trees


@pytest.mark.usefixtures("marked")
async def test_a_pip_package_planted_in_the_working_directory_is_not_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    workspace, marker = tmp_path / "ws", tmp_path / "marker"
    plant_pip(workspace, marker)
    monkeypatch.chdir(workspace)  # ipybox mcp --workspace .
    result = await install_requirements([MISSING], extra_args=["--no-index"])
    assert not marker.exists(), "the planted pip ran on the host"
    assert not result.ok and MISSING in result.output, result.output  # the real pip ran, and failed
    naive_pip(workspace, "install", "--no-index", MISSING)  # control
    assert marker.read_text() == "planted code ran"


@pytest.mark.usefixtures("marked")
async def test_a_uv_config_planted_in_the_working_directory_is_not_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    uv = Path(sys.executable).with_name("uv")
    require(uv.exists() or shutil.which("uv") is not None, "uv is not installed (the test extra has it)")
    uv_path = str(uv) if uv.exists() else str(shutil.which("uv"))
    environment = tmp_path / "env"  # made without pip: install_package then runs uv pip
    venv.EnvBuilder(with_pip=False).create(environment)
    python = str(environment / "bin" / "python")
    workspace, marker = tmp_path / "ws", tmp_path / "marker-cache"
    workspace.mkdir()
    # uv.toml can name indexes, find-links, a cache (a package of the attacker's choosing); the
    # cache directory uv creates is the visible sign that the file was read.
    (workspace / "uv.toml").write_text(f"cache-dir = {json.dumps(str(marker))}\n")
    monkeypatch.setenv("PATH", f"{Path(uv_path).parent}{os.pathsep}{os.environ.get('PATH', os.defpath)}")
    monkeypatch.chdir(workspace)
    result = await install_requirements([MISSING], python=python, extra_args=["--no-index"])
    assert not result.ok and MISSING in result.output, result.output
    assert not marker.exists()
    subprocess.run(  # control: uv pip the old way, in the workspace
        [uv_path, "pip", "install", "--python", python, "--no-index", MISSING],
        cwd=workspace,
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert marker.is_dir()


async def test_pip_config_in_a_sandbox_writable_home_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, marked: dict[str, bool]
) -> None:
    home = tmp_path / "home"  # the workspace is the home directory (cd ~ && ipybox mcp --sandbox)
    (home / ".config" / "pip").mkdir(parents=True)
    (home / ".config" / "pip" / "pip.conf").write_text(
        "[global]\nindex-url = http://planted.invalid/simple\n"
    )
    # Control: even isolated pip in / reads the planted config from $HOME.
    done = subprocess.run(
        [sys.executable, "-I", "-m", "pip", "config", "list"],
        cwd="/",
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "HOME": str(home)},
        check=False,
    )
    assert "planted.invalid" in done.stdout, done.stdout + done.stderr
    monkeypatch.setenv("HOME", str(home))
    mark_sandbox_writable([home], python_env_read_only=True)
    with pytest.raises(ConfigError, match=r"refusing to run pip on the host: the home directory"):
        await install_requirements([MISSING], extra_args=["--no-index"])


async def test_a_wheel_the_sandbox_wrote_is_refused(tmp_path: Path, marked: dict[str, bool]) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    wheel = build_probe_wheel(workspace)
    requirement = f"ipybox-install-probe @ {wheel.as_uri()}"
    assert "Would install" in naive_pip(tmp_path, "install", "--dry-run", "--no-deps", requirement)  # control
    mark_sandbox_writable([workspace], python_env_read_only=True)
    with pytest.raises(ConfigError, match=r"the requirement .* can be written by sandboxed code"):
        await install_requirements([requirement])
    with pytest.raises(ConfigError, match=r"the pip argument .* can be written by sandboxed code"):
        await install_requirements([MISSING], extra_args=[f"--find-links={workspace}"])


async def test_an_interpreter_the_sandbox_can_write_is_refused(
    tmp_path: Path, marked: dict[str, bool]
) -> None:
    workspace = tmp_path / "ws"
    environment = workspace / ".venv"
    venv.EnvBuilder(with_pip=False).create(environment)
    python = str(environment / "bin" / "python")
    # Mounted read-only over the workspace (the policy's python_env): the environment stays the host's.
    mark_sandbox_writable([workspace], python_env_read_only=True)
    result = await install_requirements([MISSING], python=python, extra_args=["--no-index"])
    assert not result.ok  # ran (pip is not there, or uv did not find the package), was not refused
    # Without python_env the sandbox can write the environment's site-packages (.pth files run at start).
    mark_sandbox_writable([workspace], python_env_read_only=False)
    with pytest.raises(ConfigError, match=r"the Python (interpreter|environment) .* can be written"):
        await install_requirements([MISSING], python=python, extra_args=["--no-index"])


async def test_sandboxed_code_cannot_run_code_on_the_host_through_install_package(tmp_path: Path) -> None:
    """The issue's attack end to end: ``ipybox mcp --sandbox`` started in a directory the sandbox can
    write, sandboxed code (real bubblewrap) plants ``pip/`` there, the client installs a package.

    The server's directory is an ``allow_write`` path rather than the session's workspace itself, so
    the attack stays the same wherever the session's workspace lies (``--workspace .`` made them one).
    """
    require(shutil.which("bwrap") is not None, "bubblewrap is not installed")
    ipybox = Path(sys.executable).with_name("ipybox")
    require(ipybox.exists(), "the ipybox console script is not installed")
    served_from, marker = tmp_path / "served-from", tmp_path / "marker"
    served_from.mkdir()
    policy = tmp_path / "sandbox.json"
    policy.write_text(json.dumps({"allow_write": [str(served_from)]}))
    command = [str(ipybox), "mcp", "--workspace", str(tmp_path / "ws"), "--sandbox-config", str(policy)]
    command += ["--yes", "--pip-arg=--no-index"]
    params = StdioServerParameters(
        command=command[0], args=command[1:], env={"PYTHONUNBUFFERED": "1"}, cwd=served_from
    )
    plant = (
        "import os, pathlib\n"
        f"pip = pathlib.Path({str(served_from)!r}, 'pip')\n"
        "pip.mkdir()\n"
        "(pip / '__init__.py').write_text('')\n"
        f"(pip / '__main__.py').write_text({plant_source(marker)!r})\n"
        "print(os.environ.get('IPYBOX_SANDBOX'))"
    )
    async with ClientActor(Client(params, read_timeout_seconds=120)) as client:
        planted = await client.call_tool("execute_code", {"code": plant})
        assert text_of(planted) == "bwrap", text_of(planted)
        assert (served_from / "pip" / "__main__.py").is_file()  # the sandbox wrote it on the host
        result = await client.call_tool("install_package", {"packages": [MISSING]})
        assert not marker.exists(), "the planted pip ran on the host"
        assert result.is_error and MISSING in text_of(result), text_of(result)  # the real pip ran
    naive_pip(served_from, "install", "--no-index", MISSING)  # control: the old command, same place
    assert marker.read_text() == "planted code ran"


def plant_source(marker: Path) -> str:
    """A planted module: it leaves ``marker`` (a host path the sandbox cannot see)."""
    return f"import pathlib\npathlib.Path({str(marker)!r}).write_text('planted code ran')\n"


async def test_a_stdio_server_does_not_start_in_ipybox_s_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``python -m ipybox_core.demo.server`` (the demo's config) started by a server whose working
    directory is a workspace: a planted ``ipybox_core`` package there used to shadow the real one."""
    workspace, marker = tmp_path / "ws", tmp_path / "marker"
    planted = workspace / "ipybox_core" / "demo"
    planted.mkdir(parents=True)
    for folder in (workspace / "ipybox_core", planted):
        (folder / "__init__.py").write_text("")
    (planted / "server.py").write_text(plant_source(marker))
    monkeypatch.chdir(workspace)
    async with McpRegistry() as registry:
        tools = await registry.add(
            "shop", {"command": sys.executable, "args": ["-m", "ipybox_core.demo.server"]}
        )
    assert tools and not marker.exists()  # the real demo server ran
    subprocess.run(  # control: the same command in the workspace, as the SDK used to start it
        [sys.executable, "-m", "ipybox_core.demo.server"], cwd=workspace, timeout=120, check=False
    )
    assert marker.read_text() == "planted code ran"
