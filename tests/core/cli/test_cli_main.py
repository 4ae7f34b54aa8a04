"""The ``ipybox`` command itself: help, version, the demo (the README's main command), colours."""

from __future__ import annotations

import io
import shutil
import sys
from pathlib import Path

import pytest
from cli_kit import ipybox

from ipybox_core.cli import main
from ipybox_core.cli._console import Console


def test_help_lists_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    for command in ("demo", "run", "gen", "mcp"):
        assert f"\n    {command} " in out
    for command in ("run", "gen", "mcp", "demo"):
        assert main([command, "--help"]) == 0
        assert "usage: ipybox " + command in capsys.readouterr().out


def test_unknown_commands_and_options_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    assert main(["frobnicate"]) == 2
    assert main(["mcp", "--transport", "carrier-pigeon"]) == 2
    assert "invalid choice" in capsys.readouterr().err


def test_the_installed_entry_point_runs(tmp_path: Path) -> None:
    script = Path(sys.executable).parent / "ipybox"
    assert script.is_file() or shutil.which("ipybox"), "the ipybox console script is not installed"
    import subprocess

    done = subprocess.run([str(script), "--version"], capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0 and done.stdout.startswith("ipybox ")


def test_demo_runs_to_the_end(tmp_path: Path) -> None:
    done = ipybox("demo", "-y", cwd=tmp_path, timeout=180)
    assert done.returncode == 0, done.stderr
    assert (
        "approve shop.place_order(product_id='b-101', quantity=1) [destructive]? [y/N] y (auto)"
        in done.stdout
    )
    assert done.stdout.rstrip().endswith("done.")


def test_colours_only_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm")

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    assert Console(Terminal()).colour
    assert not Console(io.StringIO()).colour
    monkeypatch.setenv("NO_COLOR", "1")
    assert not Console(Terminal()).colour
    monkeypatch.delenv("NO_COLOR")
    monkeypatch.setenv("FORCE_COLOR", "1")
    assert Console(io.StringIO()).colour
    stream = Terminal()
    Console(stream, colour=True).error("bad")
    assert stream.getvalue() == "\x1b[31;1mipybox: error: \x1b[0mbad\n"
    quiet = io.StringIO()
    Console(quiet, quiet=True).progress("connecting")
    assert quiet.getvalue() == ""
