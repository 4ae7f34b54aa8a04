"""``ipybox mcp --api-dir``: the generated API can live outside the project."""

from __future__ import annotations

from pathlib import Path

from ipybox_core.mcp_server.service import IpyboxService
from ipybox_core.mcp_server.settings import McpServerSettings
from servers import PYTHON, SERVE_SCRIPT


async def test_generated_api_goes_to_api_dir(tmp_path: Path) -> None:
    settings = McpServerSettings(workspace=tmp_path / "project", api_dir=tmp_path / "cache" / "mcptools")
    (tmp_path / "project").mkdir()
    async with IpyboxService(settings) as service:
        executor = await service.executor()
        await executor.register_mcp_server("test", {"command": PYTHON, "args": [str(SERVE_SCRIPT), "stdio"]})
        result = await executor.execute(
            "from mcptools.test import add\nprint(add(a=2, b=2))", approve_all=True
        )
        assert result.text.strip() == "4"
    assert (tmp_path / "cache" / "mcptools" / "test").is_dir()
    assert not (tmp_path / "project" / "mcptools").exists()
