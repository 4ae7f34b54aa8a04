"""The client example in docs/mcp_server.md runs as written and prints what the page says."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

DOC = Path(__file__).parents[3] / "docs" / "mcp_server.md"


def example(heading: str) -> tuple[str, str]:
    """The example file whose snippet the page shows after ``heading`` (``<!-- snippet: FILE:part -->``,
    rendered by scripts/render_docs.py), and the ```text block that shows its output."""
    text = DOC.read_text()
    section = text[text.index(heading) :]
    include = re.search(r"<!-- snippet: ([^:\s]+)(?::[\w-]+)? -->.*?<!-- /snippet -->", section, re.DOTALL)
    assert include
    output = re.search(r"\n```text\n(.*?)```", section[include.end() :], re.DOTALL)
    assert output
    return (DOC.parents[1] / include.group(1)).read_text(), output.group(1)


def test_the_python_client_example(tmp_path: Path) -> None:
    code, expected = example("### A client in Python")
    (tmp_path / "client.py").write_text(code)
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"  # `ipybox` on PATH
    done = subprocess.run(
        [sys.executable, "client.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=180,
        env={**os.environ, "PATH": path},
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    expected_lines = expected.strip().splitlines()
    assert len(lines) == len(expected_lines), done.stdout
    for line, pattern in zip(lines, expected_lines, strict=True):
        # "..." in the documented output stands for anything
        assert re.fullmatch(".*".join(map(re.escape, pattern.split("..."))), line), (line, pattern)
