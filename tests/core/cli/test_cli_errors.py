"""Errors a new user meets first: one line that says what happened and what to do, no traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_kit import ipybox, write_config

from servers import PYTHON

HINT_MISSING = "(the command is not on the application's PATH: use an absolute path, sys.executable"
HINT_EXITED = "(the server exited: its stderr says why"


def error_lines(stderr: str) -> list[str]:
    """Everything from the ``ipybox: error:`` line on (progress lines come before it)."""
    lines = stderr.splitlines()
    starts = [index for index, line in enumerate(lines) if line.startswith("ipybox: error: ")]
    assert len(starts) == 1, stderr
    return lines[starts[0] :]


@pytest.mark.parametrize(
    ("server", "message"),
    [
        (
            # logs to stdout, then would serve (never answers): without failing fast, the connect
            # timeout of 600 s would outlast the subprocess timeout
            {
                "command": PYTHON,
                "args": [
                    "-c",
                    "print('Server listening on stdio', flush=True); import time; time.sleep(600)",
                ],
                "connect_timeout": 600,
            },
            "the server wrote non-protocol output on stdout (MCP stdio servers must write only JSON-RPC "
            "messages there, and log to stderr); first offending line: 'Server listening on stdio'",
        ),
        ({"command": "no-such-mcp-server"}, HINT_MISSING),
        (
            {"command": PYTHON, "args": ["-c", "raise SystemExit(3)"]},
            "MCP error -32000: Connection closed " + HINT_EXITED,
        ),
    ],
    ids=["stdout-noise", "missing-command", "server-exits"],
)
def test_an_mcp_server_that_cannot_connect_is_one_line(
    server: dict[str, object], message: str, tmp_path: Path
) -> None:
    write_config(tmp_path / "mcp.json", {"srv": server})
    done = ipybox("gen", "srv", "--config", "mcp.json", cwd=tmp_path, timeout=60)
    assert done.returncode == 3, done.stderr
    (line,) = error_lines(done.stderr)
    assert line.startswith("ipybox: error: cannot connect to MCP server 'srv' (stdio: ")
    assert message in line
    assert "Traceback" not in done.stderr and "pydantic" not in done.stderr


def test_an_invalid_sandbox_policy_is_one_line_per_problem(tmp_path: Path) -> None:
    policy = {"no_such_field": 1, "limits": {"memory_mb": "lots"}}
    (tmp_path / "policy.json").write_text(json.dumps(policy))
    done = ipybox("run", "-", "--sandbox-config", "policy.json", stdin="print(1)", cwd=tmp_path)
    assert done.returncode == 2
    assert error_lines(done.stderr) == [
        "ipybox: error: invalid sandbox policy policy.json (2 problems):",
        "  limits.memory_mb: Input should be a valid integer, unable to parse string as an integer (got 'lots')",
        "  no_such_field: unknown setting",
    ]
    assert "starting the kernel" not in done.stderr  # reported before anything starts
    (tmp_path / "policy.json").write_text(json.dumps({"allow_hosts": 5}))
    done = ipybox("run", "-", "--sandbox-config", "policy.json", stdin="print(1)", cwd=tmp_path)
    assert error_lines(done.stderr) == [
        "ipybox: error: invalid sandbox policy policy.json: allow_hosts: Input should be a valid tuple (got 5)"
    ]
    assert "https://" not in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize("command", ["run", "demo", "mcp", "gen"])
def test_an_unknown_flag_shows_the_subcommands_usage(command: str, tmp_path: Path) -> None:
    done = ipybox(
        command,
        *(["x.py"] if command == "run" else ["x"] if command == "gen" else []),
        "--bogus",
        cwd=tmp_path,
    )
    assert done.returncode == 2
    assert done.stderr.startswith(f"usage: ipybox {command} ")
    assert (
        done.stderr.rstrip().splitlines()[-1] == f"ipybox {command}: error: unrecognized arguments: --bogus"
    )
