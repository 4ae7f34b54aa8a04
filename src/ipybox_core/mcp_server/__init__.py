"""ipybox as an MCP server (``ipybox mcp``): code actions with approved MCP calls for any MCP client.

```python
from ipybox_core.mcp_server import IpyboxService, McpServerSettings, serve

settings = McpServerSettings(workspace=Path("ws"), config=Path("mcp.json"))
await serve(IpyboxService(settings), transport="stdio")
```

Tools: ``execute_code``, ``register_mcp_server``, ``list_mcp_servers``, ``api_reference``,
``install_package``, ``reset``. MCP calls made by the code are approved by the user through MCP
elicitation (see :mod:`ipybox_core.mcp_server.approvals`).
"""

from ipybox_core.mcp_server.approvals import Approver
from ipybox_core.mcp_server.auth import TOKEN_ENV
from ipybox_core.mcp_server.environment import KERNEL_ENV_PREFIX, Environment, load_environment
from ipybox_core.mcp_server.packages import InstallResult, install_requirements, validate_requirements
from ipybox_core.mcp_server.server import build_server, http_app, serve
from ipybox_core.mcp_server.service import ExecutorUnavailable, IpyboxService
from ipybox_core.mcp_server.settings import McpServerSettings

__all__ = [
    "KERNEL_ENV_PREFIX",
    "TOKEN_ENV",
    "Approver",
    "Environment",
    "ExecutorUnavailable",
    "InstallResult",
    "IpyboxService",
    "McpServerSettings",
    "build_server",
    "http_app",
    "install_requirements",
    "load_environment",
    "serve",
    "validate_requirements",
]
