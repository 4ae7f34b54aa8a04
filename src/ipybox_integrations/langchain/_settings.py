"""How one ``execute_code`` tool runs code and gets MCP calls approved."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from langchain.agents.middleware.human_in_the_loop import HITLRequest, HITLResponse

from ipybox_integrations._session import Conversations, Session, SessionSource
from ipybox_integrations._waiting import WaitingCalls
from ipybox_integrations.langchain._hitl import DecisionName, Describe, InterruptMode

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
    conversations: Conversations = field(init=False)
    waiting: WaitingCalls = field(init=False)
    """The calls this tool left waiting for a decision (the executions wait in their executors)."""
    notes: dict[tuple[str, str], list[str]] = field(init=False, default_factory=dict)
    """What the model must read before a waiting call's result (its restart notice), by (thread, call)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "conversations", Conversations(self.source))
        object.__setattr__(self, "waiting", WaitingCalls(self.source, abandon_after=self.abandon_after))

    async def session(self, thread_id: str) -> tuple[Session, list[str]]:
        """The thread's session, and the notes the model must read first (its restart notice)."""
        session = await self.conversations.session(thread_id)
        notice = session.take_restart_notice()
        return session, [notice] if notice else []
