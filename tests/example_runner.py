"""Running the scripts of ``examples/`` as a user would: a subprocess, no terminal, no API key."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

ROOT = Path(__file__).parents[1]
EXAMPLES = ROOT / "examples"
DOCS = ROOT / "docs"
KEYS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "IPYBOX_MODEL")


def run_example(
    name: str, *args: str, env: Mapping[str, str] | None = None, timeout: float = 180
) -> subprocess.CompletedProcess[str]:
    """Run ``examples/<name>`` from the repository root with stdin not a terminal; assert exit 0."""
    environ = {key: value for key, value in os.environ.items() if key not in KEYS}
    litter = ROOT / "mcptools"  # the generated API of an executor whose workspace is the cwd
    littered_before = litter.exists()
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / name), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**environ, **(env or {})},
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert done.returncode == 0, f"{name} exited with {done.returncode}\n{done.stdout}\n{done.stderr}"
    assert littered_before or not litter.exists(), f"{name} generated mcptools/ in the repository"
    return done


def documented(page: str, *lines: str) -> None:
    """Each of ``lines`` appears in ``docs/<page>`` (the page shows the real output)."""
    text = (DOCS / page).read_text(encoding="utf-8")
    for line in lines:
        assert line in text, f"docs/{page} does not show the output line {line!r}"


def run_in_terminal(name: str, answers: list[str], *, returncode: int = 0, timeout: float = 180) -> str:
    """Run ``examples/<name>`` on a pseudo-terminal, typing one answer at each ``[y/N]`` prompt.

    Returns everything the script wrote; asserts its exit code and that it used every answer.
    """
    master, slave = pty.openpty()
    environ = {key: value for key, value in os.environ.items() if key not in KEYS}
    process = subprocess.Popen(
        [sys.executable, str(EXAMPLES / name)],
        cwd=ROOT,
        stdin=slave,
        stdout=slave,
        stderr=slave,
        env=environ,
        close_fds=True,
    )
    os.close(slave)
    output = b""
    pending = list(answers)
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.5)
            if not ready:
                if process.poll() is not None:
                    break
                continue
            try:
                chunk = os.read(master, 4096)
            except OSError:  # the script exited and closed the terminal
                break
            if not chunk:
                break
            output += chunk
            if pending and output.rstrip().endswith(b"[y/N]"):
                os.write(master, (pending.pop(0) + "\n").encode())
        process.wait(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        os.close(master)
    text = output.decode(errors="replace").replace("\r\n", "\n")
    assert process.returncode == returncode, text
    assert not pending, f"the script did not ask {len(pending)} more question(s):\n{text}"
    return text
