"""Safe defaults: a private temporary workspace, and MCP calls that time out before the execution."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from executor_kit import STDIO_SERVER

from ipybox_core import CodeExecutor
from ipybox_core.executor import DEFAULT_TIMEOUT


async def test_the_default_workspace_is_a_fresh_directory_removed_at_close(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    async with CodeExecutor(approval="never", mcp_servers={"test": STDIO_SERVER}) as ex:
        workspace = ex.workspace
        assert workspace != tmp_path.resolve() and workspace.is_dir()
        result = await ex.execute(
            "import os\nfrom mcptools.test import add\nprint(os.getcwd(), add(a=1, b=1))"
        )
        assert result.text.split() == [str(workspace), "2"]
    assert not workspace.exists()
    assert os.listdir(tmp_path) == []  # nothing written into the current directory


async def test_a_given_workspace_is_kept(tmp_path: Path) -> None:
    async with CodeExecutor(workspace=tmp_path / "ws", approval="never") as ex:
        await ex.execute("open('kept.txt', 'w').write('x')")
    assert (tmp_path / "ws" / "kept.txt").read_text() == "x"


@pytest.mark.parametrize(("timeout", "expected"), [(DEFAULT_TIMEOUT, 60.0), (10.0, 5.0), (None, 60.0)])
def test_the_default_call_timeout_fires_before_the_execution_timeout(
    timeout: float | None, expected: float, tmp_path: Path
) -> None:
    ex = CodeExecutor(workspace=tmp_path, timeout=timeout)
    assert ex._registry.call_timeout == expected
    assert CodeExecutor(workspace=tmp_path, call_timeout=500)._registry.call_timeout == 500
