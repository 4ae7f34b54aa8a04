"""Secrets for MCP servers, ``KERNEL_ENV_`` variables for the kernel, and ``.env`` parsing."""

from __future__ import annotations

from pathlib import Path

import pytest

from ipybox_core.errors import ConfigError
from ipybox_core.mcp_server.environment import load_environment, parse_dotenv


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / ".env"
    path.write_text(text)
    return path


def test_dotenv_syntax(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "# comment\n\n"
        "PLAIN=value\n"
        "export EXPORTED = spaced value  # trailing comment\n"
        "SINGLE='literal \\n $X # not a comment'\n"
        'DOUBLE="line1\\nline2 \\"quoted\\""\n'
        "EMPTY=\n"
        "URL=https://host/path#fragment\n",
    )
    assert parse_dotenv(path) == {
        "PLAIN": "value",
        "EXPORTED": "spaced value",
        "SINGLE": "literal \\n $X # not a comment",
        "DOUBLE": 'line1\nline2 "quoted"',
        "EMPTY": "",
        "URL": "https://host/path#fragment",
    }


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ("NO_EQUALS", "expected NAME=value"),
        ("1BAD=x", "expected NAME=value"),
        ('OPEN="unterminated', "unterminated"),
    ],
)
def test_malformed_dotenv_names_the_line(tmp_path: Path, line: str, problem: str) -> None:
    path = write(tmp_path, f"GOOD=1\n{line}\n")
    with pytest.raises(ConfigError, match=rf"\.env:2: .*{problem}"):
        parse_dotenv(path)


def test_host_environment_wins_over_dotenv_and_only_kernel_env_reaches_the_kernel(tmp_path: Path) -> None:
    path = write(tmp_path, "TOKEN=from-file\nONLY_FILE=1\nKERNEL_ENV_MODE=file\nKERNEL_ENV_=ignored\n")
    env = load_environment(path, environ={"TOKEN": "from-host", "KERNEL_ENV_USER_NAME": "ada", "HOME": "/h"})
    assert env.dotenv == path
    assert env.mcp_env["TOKEN"] == "from-host"
    assert env.mcp_env["ONLY_FILE"] == "1"
    assert env.kernel_env == {"MODE": "file", "USER_NAME": "ada"}


def test_a_missing_dotenv_is_fine(tmp_path: Path) -> None:
    env = load_environment(tmp_path / ".env", environ={"A": "1"})
    assert env.dotenv is None and env.mcp_env == {"A": "1"} and env.kernel_env == {}


def test_the_error_names_the_line_after_blank_lines_and_comments(tmp_path: Path) -> None:
    path = write(tmp_path, "GOOD=1\n\n# comment\n\nNO_EQUALS\n")
    with pytest.raises(ConfigError, match=r"\.env:5: expected NAME=value, got 'NO_EQUALS'"):
        parse_dotenv(path)
