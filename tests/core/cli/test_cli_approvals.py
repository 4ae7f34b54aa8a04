"""``ipybox approvals``: each mistake and an unreachable service are one line, never a traceback
(answering a real service is tested in tests/service/test_service_inbox.py)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from cli_kit import ipybox


def _free_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"  # nothing listens there


@pytest.mark.parametrize(
    ("args", "code", "line"),
    [
        (
            ["approve", "abc12345", "--token-file", "missing"],
            2,
            "cannot read the token file 'missing': No such file or directory",
        ),
        (["approve", "abc12345", "--arguments", "{nope"], 2, "--arguments is not valid JSON: "),
        (["approve", "abc12345", "--arguments", "[1]"], 2, "--arguments must be a JSON object"),
        (["list"], 3, "cannot connect to the ipybox service at http://127.0.0.1:"),
    ],
)
def test_a_mistake_or_an_unreachable_service_is_one_line(
    tmp_path: Path, args: list[str], code: int, line: str
) -> None:
    done = ipybox("approvals", *args, "--url", _free_url(), cwd=tmp_path, env={"IPYBOX_MCP_TOKEN": "t" * 32})
    errors = [text for text in done.stderr.splitlines() if text.startswith("ipybox: error: ")]
    assert done.returncode == code and len(errors) == 1 and "Traceback" not in done.stderr, done.stderr
    assert errors[0].startswith("ipybox: error: " + line), errors[0]


def test_an_empty_token_file_is_named(tmp_path: Path) -> None:
    (tmp_path / "token").write_text("\n")
    done = ipybox("approvals", "list", "--token-file", "token", "--url", _free_url(), cwd=tmp_path)
    assert (done.returncode, done.stderr.strip()) == (2, "ipybox: error: the token file 'token' is empty")
