"""Starting a test server that announces itself on stdout (``PORT <n>``, ``PORTS <a> <b> ...``)."""

from __future__ import annotations

import select
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path


def start_announcing(
    command: list[str], prefix: str, log: Path, *, env: Mapping[str, str] | None = None, timeout: float = 60
) -> tuple[subprocess.Popen[str], list[str]]:
    """Start ``command`` (stderr to ``log``), wait for its first stdout line; the process and that
    line's words after ``prefix``. A server that exits or says something else is killed and reported."""
    with log.open("a") as stderr:
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=stderr, text=True, env=env)
    assert process.stdout is not None
    deadline, line = time.monotonic() + timeout, ""
    while not line and time.monotonic() < deadline and process.poll() is None:
        if select.select([process.stdout], [], [], 0.1)[0]:
            line = process.stdout.readline()
    if not line.startswith(f"{prefix} "):
        process.kill()
        raise RuntimeError(f"{Path(command[1]).name} did not start: {line!r}\n{log.read_text()}")
    return process, line.split()[1:]
