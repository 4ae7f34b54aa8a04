"""``ipybox run``: output, approvals in the terminal, exit codes, and errors without tracebacks."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest
from cli_kit import ECHO_SERVER, ipybox, write_config

from ipybox_core.cli import main

CALL_TWICE = """\
from mcptools.echo import echo
print(echo(text="first"))
try:
    echo(text="second")
except PermissionError as error:
    print("rejected:", error)
"""


def test_output_result_and_exit_code_0(tmp_path: Path) -> None:
    (tmp_path / "script.py").write_text("import sys\nprint('out')\nprint('err', file=sys.stderr)\n6 * 7\n")
    done = ipybox("run", "script.py", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "out\n42\n"
    assert "err\n" in done.stderr and "starting the kernel" in done.stderr
    assert "\x1b[" not in done.stderr  # no colours without a terminal


def test_code_that_raises_exits_1_with_its_traceback(tmp_path: Path) -> None:
    done = ipybox("run", "-", stdin="def f():\n    return {}['missing']\nf()\n", cwd=tmp_path)
    assert done.returncode == 1
    assert "KeyError: 'missing'" in done.stderr and "return {}['missing']" in done.stderr
    assert "ipybox_core" not in done.stderr


def test_mcp_calls_are_approved_with_answers_on_stdin(tmp_path: Path) -> None:
    config = write_config(tmp_path / "mcp.json", {"echo": ECHO_SERVER})
    (tmp_path / "calls.py").write_text(CALL_TWICE)
    done = ipybox("run", "calls.py", "--config", str(config), stdin="y\nn\n", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["first", "rejected: echo.echo was rejected: the user said no"]
    assert "connecting to MCP server 'echo'" in done.stderr
    assert "approve echo.echo(text='first')? [y/N] y\n" in done.stderr
    assert "approve echo.echo(text='second')? [y/N] n\n" in done.stderr


def test_without_a_terminal_calls_are_rejected_with_a_hint_and_yes_approves(tmp_path: Path) -> None:
    config = write_config(tmp_path / "mcp.json", {"echo": ECHO_SERVER})
    done = ipybox("run", "-", "--config", str(config), stdin=CALL_TWICE, cwd=tmp_path)
    assert done.returncode == 1  # the first, unguarded call raised
    assert "PermissionError" in done.stderr and "run `ipybox run` with --yes" in done.stderr
    done = ipybox("run", "-", "--config", str(config), "--yes", stdin=CALL_TWICE, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["first"]  # no rejection
    assert "approve echo.echo(text='second')? [y/N] y (--yes)" in done.stderr


def test_a_timeout_exits_3(tmp_path: Path) -> None:
    done = ipybox("run", "-", "--timeout", "1", stdin="import time\ntime.sleep(30)\n", cwd=tmp_path)
    assert done.returncode == 3
    assert "timeout" in done.stderr and "Traceback" not in done.stderr


def test_images_are_saved_on_request(tmp_path: Path) -> None:
    code = "from IPython.display import Image, display\nimport base64\n" + (
        "display(Image(data=base64.b64decode("
        "'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==')))\n"
    )
    done = ipybox("run", "-", "--images", "shots", stdin=code, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"[image 1: {Path('shots') / 'image-1.png'}]"
    assert (tmp_path / "shots" / "image-1.png").read_bytes().startswith(b"\x89PNG")


def test_user_mistakes_are_one_line_errors_with_exit_code_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bad.json").write_text("{not json")
    (tmp_path / "unset.json").write_text(
        '{"mcpServers": {"x": {"url": "https://h/mcp?key=${IPYBOX_UNSET_VAR}"}}}'
    )
    cases = {
        ("run", "missing.py"): "missing.py: no such file",
        ("run", "-", "--config", "nowhere.json"): "MCP config file 'nowhere.json' does not exist",
        ("run", "-", "--config", "bad.json"): "is not valid JSON",
        ("run", "-", "--config", "unset.json"): "IPYBOX_UNSET_VAR not set",
        ("run", "-", "--sandbox-config", "nope.toml"): "sandbox config file 'nope.toml' does not exist",
        ("run", "-", "--timeout", "-1"): "must be greater than 0",
    }
    for args, message in cases.items():
        monkeypatch.setattr(sys, "stdin", io.StringIO("print(1)"))
        code = main(list(args))
        stderr = capsys.readouterr().err
        assert code == 2, (args, stderr)
        assert message in stderr, (args, stderr)
        assert "Traceback" not in stderr, args


def test_an_unreachable_mcp_server_exits_3(tmp_path: Path) -> None:
    config = write_config(tmp_path / "mcp.json", {"gone": {"command": str(tmp_path / "no-such-server")}})
    done = ipybox("run", "-", "--config", str(config), stdin="print(1)", cwd=tmp_path)
    assert done.returncode == 3
    assert "cannot connect to MCP server 'gone'" in done.stderr and "Traceback" not in done.stderr
