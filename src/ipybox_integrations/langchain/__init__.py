"""ipybox for LangChain agents: ``create_agent(model, middleware=[CodeActionMiddleware(executor)])``.

The agent gets one tool, ``execute_code``. Every MCP call its code makes becomes a LangGraph
``interrupt()`` shaped exactly like ``HumanInTheLoopMiddleware``'s (a ``HITLRequest`` with one action
named ``server.tool``), resumed with ``Command(resume={"decisions": [...]})``; the suspended kernel
execution continues where it stopped. Outside a graph an async ``approval_callback`` answers instead.
The agent's own tools are callable from the code too (``from agent_tools import <tool>``), gated by
the agent's ``HumanInTheLoopMiddleware`` when it is given as ``human_in_the_loop=``;
``CodeActionMiddleware(executor, agent_tools=False)`` opts out.
Needs ipybox's ``langchain`` extra (in an ipybox checkout: ``pip install -e '.[langchain]'``).
"""

from __future__ import annotations

try:
    import langchain.agents  # noqa: F401
    import langgraph.types  # noqa: F401
except ImportError as _missing:
    raise ImportError(
        "ipybox_integrations.langchain needs LangChain and LangGraph, which are not installed: "
        "install ipybox's langchain extra (in an ipybox checkout: pip install -e '.[langchain]')"
    ) from _missing

from ipybox_integrations._session import prompt_section
from ipybox_integrations.langchain._agent_tools import AgentToolSelection
from ipybox_integrations.langchain._content import ExecuteCodeError
from ipybox_integrations.langchain._hitl import DecisionName, Describe
from ipybox_integrations.langchain._sessions import cancel_suspended
from ipybox_integrations.langchain._settings import ApprovalCallback
from ipybox_integrations.langchain.middleware import CodeActionMiddleware
from ipybox_integrations.langchain.tool import execute_code_tool

__all__ = [
    "AgentToolSelection",
    "ApprovalCallback",
    "CodeActionMiddleware",
    "DecisionName",
    "Describe",
    "ExecuteCodeError",
    "cancel_suspended",
    "execute_code_tool",
    "prompt_section",
]
