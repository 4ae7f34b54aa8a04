"""The options of a :class:`~ipybox_core.executor.CodeExecutor`, typed, for what passes them on."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypedDict

if TYPE_CHECKING:
    from ipybox_core.approval import ApprovalPolicy
    from ipybox_core.hosttools import HostTool
    from ipybox_core.kernel.gateway import GatewayConfig
    from ipybox_core.mcp import McpServerConfig
    from ipybox_core.mcp.elicitation import Elicit
    from ipybox_core.mcp.oauth import Authorize
    from ipybox_core.mcp.oauth_store import TokenStore
    from ipybox_core.mcp.sampling import Sample
    from ipybox_core.sandbox import SandboxPolicy


class ExecutorOptions(TypedDict, total=False):
    """``CodeExecutor``'s keyword arguments (see there), for ``Sessions(**options)`` and the adapters
    that build executors: ``mypy --strict`` then sees a misspelt or mistyped option."""

    workspace: str | os.PathLike[str] | None
    sandbox: bool | SandboxPolicy | str | os.PathLike[str] | None
    approval: ApprovalPolicy
    approval_timeout: float | None
    audit_log: str | os.PathLike[str] | None
    approve_shell: bool
    mcp_servers: Mapping[str, Mapping[str, Any] | McpServerConfig] | str | os.PathLike[str] | None
    mcp_env: Mapping[str, str] | None
    mcp_authorize: Authorize | None
    mcp_token_store: TokenStore | None
    mcp_elicit: Elicit | None
    mcp_sample: Sample | None
    mcp_roots: Sequence[str | os.PathLike[str]] | None
    timeout: float | None
    wall_timeout: float | None
    output_limit: int
    kernel_env: Mapping[str, str] | None
    api_package: str
    api_dir: str | os.PathLike[str] | None
    connect_timeout: float
    call_timeout: float | None
    reset_cwd: bool
    kernel_gateway: str | GatewayConfig | None
    gateway_token: str | None
    host_tools: Iterable[HostTool]
