"""The approval prompt on a real terminal (a pty): Ctrl-C, Ctrl-D, a rejection, piped answers."""

from __future__ import annotations

import sys
from pathlib import Path

import pexpect
import pytest
from cli_kit import ECHO_SERVER, ipybox, write_config

pytestmark = pytest.mark.slow

CALL_TWICE = """\
from mcptools.echo import echo
print(echo(text="first"))
try:
    echo(text="second")
except PermissionError as error:
    print("rejected:", error)
"""
FIRST_QUESTION = "approve shop.list_products(category='books') [read-only]? [y/N] "


def spawn(*args: str, cwd: Path) -> pexpect.spawn:
    """``ipybox ARGS`` on a new pty that is its controlling terminal (Ctrl-C sends SIGINT)."""
    return pexpect.spawn(
        sys.executable,
        ["-m", "ipybox_core.cli", *args],
        cwd=str(cwd),
        env={"PYTHONUNBUFFERED": "1", "TERM": "dumb", "PATH": "/usr/bin:/bin"},
        encoding="utf-8",
        timeout=120,
    )


def finish(child: pexpect.spawn, timeout: float = 30) -> tuple[int, str]:
    """Wait for the end of the output and the exit; (exit code or 128 + signal, all output)."""
    child.expect(pexpect.EOF, timeout=timeout)
    child.close()
    output = str(child.before or "")
    code = child.exitstatus if child.exitstatus is not None else 128 + int(child.signalstatus or 0)
    return code, output


def test_ctrl_c_at_the_demo_prompt_exits(tmp_path: Path) -> None:
    child = spawn("demo", cwd=tmp_path)
    child.expect_exact(FIRST_QUESTION)
    child.sendintr()
    code, output = finish(child)  # before the fix, input()'s thread kept the process waiting for Enter
    assert code == 130, output
    assert "ipybox: error: interrupted" in output and "Traceback" not in output


def test_a_second_ctrl_c_exits_too(tmp_path: Path) -> None:
    child = spawn("demo", cwd=tmp_path)
    child.expect_exact(FIRST_QUESTION)
    child.sendintr()
    child.sendintr()
    code, output = finish(child)
    assert code == 130, output
    assert "internal error" not in output


def test_ctrl_d_at_the_demo_prompt_rejects_and_exits(tmp_path: Path) -> None:
    child = spawn("demo", cwd=tmp_path)
    child.expect_exact(FIRST_QUESTION)
    child.sendeof()
    code, output = finish(child)
    assert code == 1, output
    assert (
        output.strip().splitlines()[-1]
        == "no answer (end of input): the call was rejected; the demo ends here"
    )
    assert "internal error" not in output and "Traceback" not in output


def test_rejecting_the_demos_first_call_is_one_line(tmp_path: Path) -> None:
    child = spawn("demo", cwd=tmp_path)
    child.expect_exact(FIRST_QUESTION)
    child.sendline("n")
    code, output = finish(child)
    assert code == 0, output
    assert output.strip().splitlines()[-1] == (
        "code action 1 stopped: shop.list_products was rejected: the user said no; the demo ends here"
    )
    assert "Traceback" not in output and "PermissionError" not in output


def test_demo_answers_y_and_n_on_a_terminal(tmp_path: Path) -> None:
    child = spawn("demo", cwd=tmp_path)
    for answer in ("y", "y"):
        child.expect_exact("[read-only]? [y/N] ")
        child.sendline(answer)
    child.expect_exact("approve shop.place_order(product_id='b-101', quantity=1) [destructive]? [y/N] ")
    child.sendline("n")
    code, output = finish(child)
    assert code == 0, output
    assert "the order was not approved: shop.place_order was rejected: the user said no" in output
    assert output.rstrip().endswith("done.")


def test_ctrl_c_at_the_run_prompt_exits(tmp_path: Path) -> None:
    config = write_config(tmp_path / "mcp.json", {"echo": ECHO_SERVER})
    (tmp_path / "calls.py").write_text(CALL_TWICE)
    child = spawn("run", "calls.py", "--config", str(config), cwd=tmp_path)
    child.expect_exact("approve echo.echo(text='first')? [y/N] ")
    child.sendintr()
    code, output = finish(child)
    assert code == 130, output
    assert "ipybox: error: interrupted" in output and "Traceback" not in output


def test_piped_answers_keep_questions_and_outcomes_on_separate_lines(tmp_path: Path) -> None:
    config = write_config(tmp_path / "mcp.json", {"echo": ECHO_SERVER})
    (tmp_path / "calls.py").write_text(CALL_TWICE)
    done = ipybox("run", "calls.py", "--config", str(config), stdin="y\nn\n", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert "approve echo.echo(text='first')? [y/N] y" in lines
    assert "approve echo.echo(text='second')? [y/N] n" in lines
    assert done.stdout.splitlines() == ["first", "rejected: echo.echo was rejected: the user said no"]
