"""PydanticAI integration: ``CodeAction``, a capability giving an agent the ``execute_code`` tool.

```python
from pydantic_ai import Agent, DeferredToolRequests
from ipybox_integrations.pydantic_ai import CodeAction

code_action = CodeAction(executor)
agent = Agent("openai:gpt-5", capabilities=[code_action], output_type=[str, DeferredToolRequests])
```

Every MCP call of the code goes through PydanticAI's approvals: inline through a handler
capability, or as ``DeferredToolRequests`` answered with :func:`approval_results`. The agent's own
tools are callable from the code too (``from agent_tools import <tool>``), asking only when the tool
requires approval; ``CodeAction(executor, agent_tools=False)`` opts out.
Needs ipybox's ``pydantic-ai`` extra (in an ipybox checkout: ``pip install -e '.[pydantic-ai]'``).
"""

try:
    import pydantic_ai as _pydantic_ai  # noqa: F401
except ImportError as error:  # pragma: no cover - exercised by a test that hides the package
    raise ImportError(
        "ipybox_integrations.pydantic_ai needs PydanticAI, which is not installed: install ipybox's "
        "pydantic-ai extra (in an ipybox checkout: pip install -e '.[pydantic-ai]')"
    ) from error

from ipybox_integrations.pydantic_ai._agent_tools import AgentToolSelection
from ipybox_integrations.pydantic_ai.approvals import (
    Decider,
    Decision,
    DecisionLike,
    PendingApproval,
    approval_results,
    pending_approvals,
)
from ipybox_integrations.pydantic_ai.capability import TOOL_NAME, CodeAction
from ipybox_integrations.pydantic_ai.events import ApprovalDecided, ApprovalRequested, CodeOutput

__all__ = [
    "TOOL_NAME",
    "AgentToolSelection",
    "ApprovalDecided",
    "ApprovalRequested",
    "CodeAction",
    "CodeOutput",
    "Decider",
    "Decision",
    "DecisionLike",
    "PendingApproval",
    "approval_results",
    "pending_approvals",
]
