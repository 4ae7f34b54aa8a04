"""``ipybox serve`` for the examples: the service as its own process, and application processes using it.

The examples in which an approval outlives the process that asked for it (``service.py`` and the
``*_service.py`` of each framework) start the service here, with the demo shop MCP server, on a
free loopback port, as you would run it under systemd or in a container.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import secrets
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from servers.demo import SHOP

Process = Callable[[str, Path], Coroutine[Any, Any, None]]
"""``process(url, state)``: one application process, given the service's URL and the state file."""


@contextmanager
def ipybox_serve(folder: Path, token: str, *options: str) -> Iterator[str]:
    """Run ``ipybox serve`` with the demo shop (kernels under ``folder``); yield its URL, then stop it."""
    config = folder / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"shop": SHOP}}))
    log = folder / "serve.log"
    command = [sys.executable, "-m", "ipybox_core.cli", "serve", "--workspace", str(folder / "ws")]
    with log.open("wb") as stderr:
        process = subprocess.Popen(
            [*command, "--config", str(config), "--port", "0", *options],
            stdin=subprocess.DEVNULL,
            stderr=stderr,
            env={**os.environ, "IPYBOX_MCP_TOKEN": token},
        )
    try:
        deadline = time.monotonic() + 60
        while not (found := re.search(r"listening on (\S+)", log.read_text())):
            if process.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"ipybox serve did not start:\n{log.read_text()}")
            time.sleep(0.05)
        yield found.group(1)
    finally:
        process.terminate()
        process.wait(30)


def run_in_two_processes(script: str, process_a: Process, process_b: Process) -> None:
    """``python script``: start ``ipybox serve``, then run ``script`` as process A, then as process B.

    Each of them is ``python script A|B URL STATE`` and runs ``process_a(url, state)`` or
    ``process_b(url, state)``: A leaves an approval waiting, stores the framework's state in the
    file ``STATE`` and exits; B loads it and answers. Both find the service's token in
    ``$IPYBOX_MCP_TOKEN``, where ``RemoteSessions`` looks for it.
    """
    if len(sys.argv) == 4:  # this is process A or B
        role, url, state = sys.argv[1:]
        asyncio.run({"A": process_a, "B": process_b}[role](url, Path(state)))
        return
    token = secrets.token_urlsafe(32)
    with tempfile.TemporaryDirectory(prefix="ipybox-service-") as tmp, ipybox_serve(Path(tmp), token) as url:
        for role in ("A", "B"):
            subprocess.run(
                [sys.executable, script, role, url, str(Path(tmp) / "state")],
                env={**os.environ, "IPYBOX_MCP_TOKEN": token},
                check=True,
            )
