"""The executor with sandbox=True: MCP calls still work, secrets and the host stay out of reach."""

from __future__ import annotations

import shutil
from pathlib import Path

from executor_kit import STDIO_SERVER, run

from ipybox_core import CodeExecutor
from prerequisites import require


async def test_sandboxed_kernel_calls_mcp_tools_but_cannot_reach_server_secrets(tmp_path: Path) -> None:
    require(shutil.which("bwrap") is not None, "bubblewrap is not installed")
    server = {**STDIO_SERVER, "env": {**STDIO_SERVER["env"], "TEST_SECRET": "s3cret-value"}}
    async with CodeExecutor(workspace=tmp_path / "ws", sandbox=True) as ex:
        await ex.register_mcp_server("test", server)
        code = (
            "import os, glob\n"
            "from mcptools.test import add, env_var, whoami\n"
            "print('sum', add(a=2, b=3))\n"
            "print('server sees', env_var(name='TEST_SECRET'))\n"
            "pid = whoami()['pid']\n"
            "print('server pid visible', os.path.exists(f'/proc/{pid}'))\n"
            "leaks = []\n"
            "for path in glob.glob('/proc/*/environ'):\n"
            "    try:\n"
            "        if b's3cret-value' in open(path, 'rb').read():\n"
            "            leaks.append(path)\n"
            "    except OSError:\n"
            "        pass\n"
            "print('leaks', leaks)\n"
            "print('sandbox', os.environ.get('IPYBOX_SANDBOX'))\n"
        )
        done = await run(ex, code)
        assert done.result.error is None, done.result.error
        assert "sum 5" in done.text
        assert "server sees s3cret-value" in done.text
        assert "server pid visible False" in done.text
        assert "leaks []" in done.text
        assert "sandbox bwrap" in done.text
        assert [r.name for r in done.requests] == ["test.add", "test.env_var", "test.whoami"]


async def test_sandboxed_kernel_survives_reset_and_keeps_tool_access(tmp_path: Path) -> None:
    require(shutil.which("bwrap") is not None, "bubblewrap is not installed")
    async with CodeExecutor(workspace=tmp_path / "ws", sandbox=True, approval="never") as ex:
        await ex.register_mcp_server("test", STDIO_SERVER)
        await ex.execute("x = 1")
        await ex.reset()
        result = await ex.execute("from mcptools.test import add\nprint('x' in dir(), add(a=1, b=1))")
        assert result.text.strip() == "False 2"


async def test_sandboxed_kernel_imports_an_api_dir_outside_the_workspace(tmp_path: Path) -> None:
    require(shutil.which("bwrap") is not None, "bubblewrap is not installed")
    api_dir = tmp_path / "state" / "tools"
    async with CodeExecutor(workspace=tmp_path / "ws", api_dir=api_dir, sandbox=True, approval="never") as ex:
        await ex.register_mcp_server("test", STDIO_SERVER)
        result = await ex.execute(
            "from tools.test import add\nprint(add(a=1, b=2))\n"
            "try:\n    open(__import__('tools').__path__[0] + '/x', 'w')\nexcept OSError as e:\n    print('read-only')"
        )
        assert result.error is None, result.error
        assert result.text.split() == ["3", "read-only"]
