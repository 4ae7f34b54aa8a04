"""MCP servers: configs, healthy connections, tool listings and calls.

```python
async with McpRegistry(connect_timeout=30, call_timeout=300) as registry:
    tools = await registry.add("demo", {"command": "python", "args": ["server.py"]})
    result = await registry.call("demo", "add", {"a": 1, "b": 2})
    result.structured, result.text, result.content
```
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ipybox_core.mcp.config import (
    HttpServerConfig,
    McpServerConfig,
    SseServerConfig,
    StdioServerConfig,
    load_mcp_config,
    parse_server_config,
)
from ipybox_core.mcp.oauth_config import OAuthConfig
from ipybox_core.mcp.oauth_store import FileTokenStore, MemoryTokenStore, TokenStore
from ipybox_core.mcp.registry import McpRegistry
from ipybox_core.mcp.types import ToolAnnotations, ToolInfo

if TYPE_CHECKING:
    from ipybox_core.mcp._lenient import McpCompatibilityWarning
    from ipybox_core.mcp.connection import McpConnection
    from ipybox_core.mcp.elicitation import ElicitationAnswer, ElicitationRequest
    from ipybox_core.mcp.oauth import AuthorizationRequest
    from ipybox_core.mcp.oauth_loopback import LoopbackRedirect, browser_authorize
    from ipybox_core.mcp.results import ToolCallResult
    from ipybox_core.mcp.sampling import SamplingRequest

# These import the MCP client library (most of a second): loaded on first use, not with the package.
_LAZY = {
    "McpCompatibilityWarning": "ipybox_core.mcp._lenient",
    "McpConnection": "ipybox_core.mcp.connection",
    "ToolCallResult": "ipybox_core.mcp.results",
    "AuthorizationRequest": "ipybox_core.mcp.oauth",
    "ElicitationAnswer": "ipybox_core.mcp.elicitation",
    "ElicitationRequest": "ipybox_core.mcp.elicitation",
    "SamplingRequest": "ipybox_core.mcp.sampling",
    "LoopbackRedirect": "ipybox_core.mcp.oauth_loopback",
    "browser_authorize": "ipybox_core.mcp.oauth_loopback",
}

__all__ = [
    "AuthorizationRequest",
    "ElicitationAnswer",
    "ElicitationRequest",
    "FileTokenStore",
    "HttpServerConfig",
    "LoopbackRedirect",
    "McpCompatibilityWarning",
    "McpConnection",
    "McpRegistry",
    "McpServerConfig",
    "MemoryTokenStore",
    "OAuthConfig",
    "SamplingRequest",
    "SseServerConfig",
    "StdioServerConfig",
    "TokenStore",
    "ToolAnnotations",
    "ToolCallResult",
    "ToolInfo",
    "browser_authorize",
    "load_mcp_config",
    "parse_server_config",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'ipybox_core.mcp' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
