"""Run the real ``ipybox`` command in a subprocess (no controlling terminal)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from servers import PYTHON, RAW_SERVER_SCRIPT

ECHO_SERVER: dict[str, Any] = {"command": PYTHON, "args": [str(RAW_SERVER_SCRIPT), "--clean"]}
"""A stdio MCP server that starts in ~50 ms; its ``echo`` tool returns ``text``."""


def ipybox(
    *args: str, cwd: Path, stdin: str | None = None, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """``ipybox ARGS`` with this interpreter; stdin is ``stdin`` or /dev/null."""
    return subprocess.run(
        [sys.executable, "-m", "ipybox_core.cli", *args],
        cwd=cwd,
        input=stdin if stdin is not None else "",
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
        start_new_session=True,  # no controlling terminal: /dev/tty cannot be opened
    )


def write_config(path: Path, servers: dict[str, Any]) -> Path:
    path.write_text(json.dumps({"mcpServers": servers}))
    return path
