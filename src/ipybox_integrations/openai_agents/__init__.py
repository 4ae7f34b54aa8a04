"""ipybox for the OpenAI Agents SDK: ``execute_code`` with each MCP call approved as an interruption.

```python
from agents import Agent, Runner
from ipybox_integrations.openai_agents import CodeActionTool

code = CodeActionTool(executor)
agent = Agent(name="analyst", instructions=code.instructions("You are a data analyst."), tools=[code])
result = await Runner.run(agent, "...")
while result.interruptions:
    state = result.to_state()
    for item in result.interruptions:  # item.tool_name / item.arguments are the MCP call's
        state.approve(item)  # or state.reject(item, rejection_message="...")
    result = await Runner.run(agent, state)
```

The agent's own function tools are callable from the code too (``from agent_tools import <tool>``),
each with its own ``needs_approval``; ``CodeActionTool(executor, agent_tools=False)`` opts out.

``CodeActionTool(sessions, key=lambda ctx: ctx.context["user"])`` (an ``ipybox_core.Sessions``) gives
each conversation its own kernel instead of one shared ``executor`` (``key`` is required then).

Needs ipybox's ``openai-agents`` extra (in an ipybox checkout: ``pip install -e '.[openai-agents]'``).
"""

from __future__ import annotations

try:
    import agents as _agents  # noqa: F401
except ImportError as error:  # pragma: no cover - exercised by simulating the missing package
    raise ImportError(
        "ipybox_integrations.openai_agents needs the OpenAI Agents SDK, which is not installed: install "
        "ipybox's openai-agents extra (in an ipybox checkout: pip install -e '.[openai-agents]')"
    ) from error

from ipybox_integrations.openai_agents._agent_tools import AgentToolSelection
from ipybox_integrations.openai_agents._driver import EventHook
from ipybox_integrations.openai_agents._output import ImageDetail
from ipybox_integrations.openai_agents._proxies import McpApprovalPolicy, proxy_identity
from ipybox_integrations.openai_agents._tool import (
    CodeActionTool,
    CodeApprovalPolicy,
    ExecuteCodeArgs,
    Instructions,
)

__all__ = [
    "AgentToolSelection",
    "CodeActionTool",
    "CodeApprovalPolicy",
    "EventHook",
    "ExecuteCodeArgs",
    "ImageDetail",
    "Instructions",
    "McpApprovalPolicy",
    "proxy_identity",
]
