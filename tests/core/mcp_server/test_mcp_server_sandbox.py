"""``ipybox mcp --sandbox-config``: the kernel runs in bubblewrap, MCP calls still work, and packages
installed on the host with ``install_package`` are importable inside the sandbox."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from mcp_server_kit import (
    ECHO_SERVER,
    PROBE_MODULE,
    ClientActor,
    build_probe_wheel,
    stdio_client,
    text_of,
    uninstall_probe,
)

from prerequisites import require


async def test_sandboxed_kernel_calls_tools_and_imports_installed_packages(tmp_path: Path) -> None:
    require(shutil.which("bwrap") is not None, "bubblewrap is not installed")
    policy = tmp_path / "sandbox.json"
    policy.write_text("{}")  # the default policy, from a file
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"echo": ECHO_SERVER}}))
    wheel = build_probe_wheel(tmp_path, answer=7)
    uninstall_probe()
    client = stdio_client(tmp_path / "ws", "--sandbox-config", str(policy), "--yes", "--config", str(config))
    try:
        async with ClientActor(client) as session:
            code = "import os\nfrom mcptools.echo import echo\nprint(os.environ.get('IPYBOX_SANDBOX'), echo(text='hi'))"
            result = await session.call_tool("execute_code", {"code": code})
            assert text_of(result) == "bwrap hi"
            result = await session.call_tool(
                "install_package", {"packages": [f"ipybox-install-probe @ {wheel.as_uri()}"]}
            )
            assert not result.is_error, text_of(result)
            result = await session.call_tool(
                "execute_code", {"code": f"import {PROBE_MODULE}\n{PROBE_MODULE}.ANSWER"}
            )
            assert text_of(result) == "7"
    finally:
        uninstall_probe()
