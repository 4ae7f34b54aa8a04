"""ipybox's client of an ipybox service (``ipybox serve``): sessions whose kernels live in the service.

```python
from ipybox_core.remote import RemoteSessions
from ipybox_integrations.pydantic_ai import CodeAction

async with RemoteSessions("http://127.0.0.1:8765/mcp", token=token) as sessions:
    agent = Agent(model, capabilities=[CodeAction(sessions)], output_type=[str, DeferredToolRequests])
```

The service is an MCP server (see :mod:`ipybox_core.protocol`); this client adds
conversation keys and call ids so that an approval can be answered from any process.
"""

from ipybox_core.errors import ApprovalError, ExecutionGone, ServiceError
from ipybox_core.protocol import WaitingApproval
from ipybox_core.remote._executor import RemoteExecutor
from ipybox_core.remote._sessions import RemoteSession, RemoteSessions

__all__ = [
    "ApprovalError",
    "ExecutionGone",
    "RemoteExecutor",
    "RemoteSession",
    "RemoteSessions",
    "ServiceError",
    "WaitingApproval",
]
