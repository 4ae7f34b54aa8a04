"""Importing the public API does not load the MCP client library: it is loaded on first connect."""

from __future__ import annotations

import subprocess
import sys


def _loaded_modules(statement: str) -> set[str]:
    code = f"import sys\n{statement}\nprint('\\n'.join(sys.modules))"
    output = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    return set(output.split())


def test_importing_code_executor_does_not_import_the_mcp_client() -> None:
    loaded = _loaded_modules("from ipybox_core import CodeExecutor, ApprovalRequest, McpServerConfig")
    assert "ipybox_core.executor.executor" in loaded
    assert not {name for name in loaded if name == "mcp" or name.startswith(("mcp.", "mcp_types"))}


def test_the_mcp_package_loads_its_client_parts_on_first_use() -> None:
    loaded = _loaded_modules(
        "import ipybox_core.mcp as m\nassert 'mcp.client' not in sys.modules\nm.McpConnection"
    )
    assert {"mcp.client", "ipybox_core.mcp.connection"} <= loaded
