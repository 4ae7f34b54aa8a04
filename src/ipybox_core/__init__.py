"""ipybox core: stateful IPython kernels, typed MCP tool APIs, per-call approvals, OS sandboxing.

The public API is importable from here (``from ipybox_core import CodeExecutor``). Names are
loaded on first use, so that kernel-side modules (``ipybox_core.runtime``, imported by generated
code inside the kernel) stay cheap to import.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ipybox_core.approval import (
        ApprovalDecision,
        ApprovalGate,
        ApprovalPolicy,
        ApprovalRequest,
        ApprovalRules,
        AuditLog,
    )
    from ipybox_core.errors import (
        ApprovalError,
        CodeError,
        CodegenError,
        ConfigError,
        ExecutionCancelled,
        ExecutionTimeout,
        ExecutorBusy,
        ExecutorClosed,
        IpyboxError,
        KernelDied,
        KernelError,
        KernelStartError,
        McpAuthorizationError,
        McpConnectionError,
        McpProtocolError,
        McpServerError,
        McpTimeout,
        SandboxError,
        SandboxUnavailable,
        ToolError,
        UnknownToolError,
    )
    from ipybox_core.executor import (
        CodeExecutor,
        DisplayOutput,
        ElicitationRequest,
        Execution,
        ExecutionEvent,
        ExecutionResult,
        OutputChunk,
        RegisteredServer,
        ToolCall,
    )
    from ipybox_core.hosttools import HostCall, HostTool
    from ipybox_core.kernel.gateway import GatewayConfig
    from ipybox_core.mcp import McpServerConfig, load_mcp_config
    from ipybox_core.sandbox import ResourceLimits, SandboxPolicy
    from ipybox_core.sessions import Session, SessionLimitError, Sessions
    from ipybox_core.terminal import approval_question, ask_approval

_EXPORTS = {
    "ipybox_core.approval": [
        "ApprovalDecision",
        "ApprovalGate",
        "ApprovalPolicy",
        "ApprovalRequest",
        "ApprovalRules",
        "AuditLog",
    ],
    "ipybox_core.errors": [
        "ApprovalError",
        "CodeError",
        "CodegenError",
        "ConfigError",
        "ExecutionCancelled",
        "ExecutionTimeout",
        "ExecutorBusy",
        "ExecutorClosed",
        "IpyboxError",
        "KernelDied",
        "KernelError",
        "KernelStartError",
        "McpAuthorizationError",
        "McpConnectionError",
        "McpProtocolError",
        "McpServerError",
        "McpTimeout",
        "SandboxError",
        "SandboxUnavailable",
        "ToolError",
        "UnknownToolError",
    ],
    "ipybox_core.executor": [
        "CodeExecutor",
        "DisplayOutput",
        "ElicitationRequest",
        "Execution",
        "ExecutionEvent",
        "ExecutionResult",
        "OutputChunk",
        "RegisteredServer",
        "ToolCall",
    ],
    "ipybox_core.hosttools": ["HostCall", "HostTool"],
    "ipybox_core.kernel.gateway": ["GatewayConfig"],
    "ipybox_core.mcp": ["McpServerConfig", "load_mcp_config"],
    "ipybox_core.sandbox": ["ResourceLimits", "SandboxPolicy"],
    "ipybox_core.sessions": ["Session", "SessionLimitError", "Sessions"],
    "ipybox_core.terminal": ["approval_question", "ask_approval"],
}
_MODULE_OF = {name: module for module, names in _EXPORTS.items() for name in names}

__all__ = [
    "ApprovalDecision",
    "ApprovalError",
    "ApprovalGate",
    "ApprovalPolicy",
    "ApprovalRequest",
    "ApprovalRules",
    "AuditLog",
    "CodeError",
    "CodeExecutor",
    "CodegenError",
    "ConfigError",
    "DisplayOutput",
    "ElicitationRequest",
    "Execution",
    "ExecutionCancelled",
    "ExecutionEvent",
    "ExecutionResult",
    "ExecutionTimeout",
    "ExecutorBusy",
    "ExecutorClosed",
    "GatewayConfig",
    "HostCall",
    "HostTool",
    "IpyboxError",
    "KernelDied",
    "KernelError",
    "KernelStartError",
    "McpAuthorizationError",
    "McpConnectionError",
    "McpProtocolError",
    "McpServerConfig",
    "McpServerError",
    "McpTimeout",
    "OutputChunk",
    "RegisteredServer",
    "ResourceLimits",
    "SandboxError",
    "SandboxPolicy",
    "SandboxUnavailable",
    "Session",
    "SessionLimitError",
    "Sessions",
    "ToolCall",
    "ToolError",
    "UnknownToolError",
    "approval_question",
    "ask_approval",
    "load_mcp_config",
]


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module 'ipybox_core' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
