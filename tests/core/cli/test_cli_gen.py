"""``ipybox gen``: a server's API generated into a directory, its signatures on stdout."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from cli_kit import ECHO_SERVER, ipybox, write_config

from ipybox_core.cli import main


def test_a_stdio_server_after_double_dash(tmp_path: Path) -> None:
    done = ipybox(
        "gen",
        "echo",
        "--out",
        "api/tools",
        "--",
        *[ECHO_SERVER["command"], *ECHO_SERVER["args"]],
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert "from tools.echo import " in done.stdout
    assert "def echo(*, text: str)" in done.stdout
    assert "connecting to 'echo'" in done.stderr and "generating the Python API of 5 tools" in done.stderr
    package = tmp_path / "api" / "tools" / "echo"
    assert (package / "__init__.py").is_file()
    # The generated package imports and type-checks its arguments without a tool server.
    check = subprocess.run(
        [sys.executable, "-c", "from tools.echo import echo; import inspect; print(inspect.signature(echo))"],
        cwd=tmp_path / "api",
        capture_output=True,
        text=True,
    )
    assert check.stdout.strip() == "(*, text: str) -> str", check.stderr


def test_an_http_server_by_url(tmp_path: Path, http_server_url: str) -> None:
    done = ipybox("gen", "remote", "--url", http_server_url, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "def create_order(" in done.stdout
    assert (tmp_path / "mcptools" / "remote" / "__init__.py").is_file()


def test_a_server_from_a_config_file(tmp_path: Path) -> None:
    write_config(tmp_path / "mcp.json", {"echo": ECHO_SERVER, "other": {"url": "https://unused.example/mcp"}})
    done = ipybox("gen", "echo", "--config", "mcp.json", "--quiet", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "def echo(" in done.stdout
    assert done.stderr == ""


def test_an_unreachable_server_exits_3(tmp_path: Path) -> None:
    done = ipybox("gen", "gone", "--", str(tmp_path / "no-such-server"), cwd=tmp_path)
    assert done.returncode == 3
    assert "cannot connect to MCP server 'gone'" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["gen", "x"], 'give the server as "-- CMD ARGS..."'),
        (["gen", "x", "--url", "http://h/mcp", "--", "cmd"], 'give the server as "-- CMD ARGS..."'),
        (["gen", "x", "--header", "A=1", "--", "cmd"], "--header and --sse are for --url servers"),
        (["gen", "x", "--url", "http://h/mcp", "--header", "novalue"], "--header expects NAME=VALUE"),
        (["gen", "x", "--config", "missing.json"], "MCP config file 'missing.json' does not exist"),
        (["run", "x.py", "--", "cmd"], '"-- CMD ARGS..." is only for "ipybox gen"'),
    ],
)
def test_usage_errors_exit_2(
    args: list[str],
    message: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(args) == 2
    assert message in capsys.readouterr().err
