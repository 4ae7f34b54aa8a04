"""How one ``execute_code`` tool runs code and gets MCP calls approved."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from langchain.agents.middleware.human_in_the_loop import HITLRequest, HITLResponse

from ipybox_core.executor import CodeExecutor
from ipybox_integrations.langchain._hitl import DecisionName, Describe

ApprovalCallback = Callable[[HITLRequest], Awaitable[HITLResponse]]
"""Decides one MCP call outside a LangGraph graph: gets a ``HITLRequest``, returns a ``HITLResponse``."""


@dataclass(frozen=True)
class ToolSettings:
    executor: CodeExecutor
    allowed_decisions: tuple[DecisionName, ...]
    approval_callback: ApprovalCallback | None
    describe: Describe
    timeout: float | None
    abandon_after: float | None
