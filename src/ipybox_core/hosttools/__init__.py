"""Host tools: the application's own functions, called from the kernel's code like MCP tools.

``CodeExecutor(host_tools=[HostTool(...)])`` (or :meth:`CodeExecutor.register_host_tools`) gives
the kernel ``from agent_tools import <tool>``: typed functions generated like an MCP server's,
whose calls pass the approval gate as calls of server :data:`HOST_SERVER` and then run in the
application, with the context bound for the running execution
(:meth:`CodeExecutor.bind_tool_context`).
"""

from ipybox_core.hosttools._backend import HostBackend, HostOutcome, HostTools
from ipybox_core.hosttools._tool import HOST_SERVER, HostCall, HostFunction, HostTool

__all__ = ["HOST_SERVER", "HostBackend", "HostCall", "HostFunction", "HostOutcome", "HostTool", "HostTools"]
