"""ipybox core: stateful IPython kernels, typed MCP tool APIs, per-call approvals, OS sandboxing."""

from __future__ import annotations

from ipybox_core.errors import (
    ApprovalError,
    CodeError,
    CodegenError,
    ConfigError,
    ExecutionTimeout,
    ExecutorBusy,
    ExecutorClosed,
    IpyboxError,
    KernelDied,
    KernelError,
    KernelStartError,
    McpConnectionError,
    McpServerError,
    McpTimeout,
    SandboxError,
    SandboxUnavailable,
    ToolError,
    UnknownToolError,
)

__all__ = [
    "ApprovalError",
    "CodeError",
    "CodegenError",
    "ConfigError",
    "ExecutionTimeout",
    "ExecutorBusy",
    "ExecutorClosed",
    "IpyboxError",
    "KernelDied",
    "KernelError",
    "KernelStartError",
    "McpConnectionError",
    "McpServerError",
    "McpTimeout",
    "SandboxError",
    "SandboxUnavailable",
    "ToolError",
    "UnknownToolError",
]
