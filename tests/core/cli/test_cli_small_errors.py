"""Small first-week errors of issue 26: each is one line that says what is wrong."""

from __future__ import annotations

from pathlib import Path

from cli_kit import ECHO_SERVER, ipybox, write_config


def _only_error(stderr: str) -> str:
    errors = [line for line in stderr.splitlines() if line.startswith("ipybox: error: ")]
    assert len(errors) == 1 and "Traceback" not in stderr, stderr
    return errors[0]


def test_gen_does_not_ask_for_an_absolute_path_when_it_was_one(tmp_path: Path) -> None:
    missing = str(tmp_path / "bin" / "no-such-server")
    done = ipybox("gen", "srv", "--", missing, cwd=tmp_path, timeout=60)
    assert done.returncode == 3
    line = _only_error(done.stderr)
    assert f"there is no executable file {missing!r}: check the path" in line
    assert "use an absolute path" not in line


def test_run_from_stdin_without_config_says_no_server_is_registered(tmp_path: Path) -> None:
    done = ipybox("run", "-", cwd=tmp_path, stdin="from mcptools.shop import list_products\n")
    assert done.returncode == 2
    line = _only_error(done.stderr)
    assert line == (
        "ipybox: error: the code imports mcptools, but no MCP server is registered: pass --config FILE "
        '(an {"mcpServers": {...}} file) with the servers the code uses'
    )


def test_run_names_the_server_that_config_does_not_register(tmp_path: Path) -> None:
    write_config(tmp_path / "mcp.json", {"echo": ECHO_SERVER})
    code = "from mcptools.shop import list_products\n"
    done = ipybox("run", "-", "--config", "mcp.json", cwd=tmp_path, stdin=code)
    assert done.returncode == 2
    assert _only_error(done.stderr) == (
        "ipybox: error: the code imports mcptools.shop, but --config registers no MCP server 'shop' "
        "(registered: echo)"
    )
