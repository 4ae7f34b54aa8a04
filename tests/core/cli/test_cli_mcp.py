"""``ipybox mcp``: configuration mistakes stop it before the MCP handshake, with exit code 2."""

from __future__ import annotations

from pathlib import Path

import pytest

from ipybox_core.cli import main


@pytest.mark.parametrize(
    ("files", "args", "message"),
    [
        ({}, ["--config", "nowhere.json"], "MCP config file 'nowhere.json' does not exist"),
        ({"mcp.json": "[1, 2"}, ["--config", "mcp.json"], "is not valid JSON"),
        (
            {"mcp.json": '{"mcpServers": {"s": {"command": "x", "env": {"T": "${IPYBOX_UNSET_VAR}"}}}}'},
            ["--config", "mcp.json"],
            "IPYBOX_UNSET_VAR not set",
        ),
        (
            {"policy.json": '{"no_such_field": 1}'},
            ["--sandbox-config", "policy.json"],
            "invalid sandbox policy",
        ),
        ({"policy.ini": ""}, ["--sandbox-config", "policy.ini"], "unknown format"),
        ({"ws/.env": "NOT A LINE\n"}, [], ".env:1: expected NAME=value"),
        ({}, ["--transport", "streamable-http", "--host", "203.0.113.1", "--port", "1"], "cannot listen on"),
        ({}, ["--output-limit", "5"], "output_limit must be at least 100"),
        ({}, ["--header-timeout", "0"], "argument --header-timeout: must be greater than 0: '0'"),
        ({}, ["--header-timeout", "inf"], "argument --header-timeout: must be a finite number of seconds"),
        ({}, ["--header-timeout", "soon"], "argument --header-timeout: not a number: 'soon'"),
    ],
)
def test_mistakes_exit_2_with_a_message(
    files: dict[str, str],
    args: list[str],
    message: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    assert main(["mcp", "--workspace", "ws", *args]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
