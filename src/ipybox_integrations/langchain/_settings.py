"""How one ``execute_code`` tool runs code and gets MCP calls approved."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from langchain.agents.middleware.human_in_the_loop import HITLRequest, HITLResponse
from langchain.tools import ToolRuntime

from ipybox_core.approval import ApprovalRequest
from ipybox_core.hosttools import HOST_SERVER
from ipybox_integrations._notes import Notes, restart_notes
from ipybox_integrations._session import Conversations, Session, SessionSource
from ipybox_integrations._waiting import WaitingCalls
from ipybox_integrations.langchain._agent_tools import AgentTools
from ipybox_integrations.langchain._hitl import DecisionName, Describe, InterruptMode, Review, decisions_for

ApprovalCallback = Callable[[HITLRequest], Awaitable[HITLResponse]]
"""Decides one MCP call outside a LangGraph graph: gets a ``HITLRequest``, returns a ``HITLResponse``."""


@dataclass(frozen=True)
class ToolSettings:
    source: SessionSource
    """One executor shared by every thread, or ``Sessions`` (one kernel per thread)."""
    allowed_decisions: tuple[DecisionName, ...]
    approval_callback: ApprovalCallback | None
    describe: Describe
    timeout: float | None
    abandon_after: float | None
    interrupt_mode: InterruptMode
    agent_tools: AgentTools | None = None
    """The agent's own tools the code calls (``CodeActionMiddleware``); ``None``: none."""
    elicitation: bool = False
    """An MCP server's question during a call is an ``elicitation`` interrupt (else it is declined)."""
    conversations: Conversations = field(init=False)
    waiting: WaitingCalls = field(init=False)
    """The calls this tool left waiting for a decision (the executions wait in their executors)."""
    notes: Notes[tuple[str, str]] = field(init=False, default_factory=Notes)
    """What the model must read before a waiting call's result (its restart notice), by (thread, call)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "conversations", Conversations(self.source))
        object.__setattr__(self, "waiting", WaitingCalls(self.source, abandon_after=self.abandon_after))

    async def session(self, thread_id: str) -> tuple[Session, list[str]]:
        """The thread's session, and the notes the model must read first (its restart notice)."""
        session = await self.conversations.session(thread_id)
        return session, restart_notes(session)

    def review(self, request: ApprovalRequest, runtime: ToolRuntime | None) -> Review | None:
        """How a held call is asked; ``None``: it runs without asking (an agent tool the agent's
        ``HumanInTheLoopMiddleware`` does not gate)."""
        review = Review(decisions_for(request, self.allowed_decisions), self.describe(request))
        if self.agent_tools is None or request.kind != "mcp" or request.server != HOST_SERVER:
            return review
        return self.agent_tools.review(request, runtime, review)
