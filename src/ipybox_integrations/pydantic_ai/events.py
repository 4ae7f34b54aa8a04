"""Events ``execute_code`` emits into the agent run's event stream (``run_stream_events``, ``iter``, UIs).

They carry what the kernel is doing while the tool call is still running: printed output as it
appears, each call that waits for approval, and how it was decided.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic_ai import CapabilityEvent

from ipybox_integrations.pydantic_ai.approvals import PendingApproval


@dataclass(kw_only=True)
class CodeOutput(CapabilityEvent, namespace="ipybox", name="code_output"):
    """Text the code printed (stdout or stderr), as it appears."""

    text: str
    stream: Literal["stdout", "stderr"] = "stdout"


@dataclass(kw_only=True)
class ApprovalRequested(CapabilityEvent, namespace="ipybox", name="approval_requested"):
    """A call of the code waits for a decision (emitted before handlers are asked or the run defers)."""

    approval: PendingApproval


@dataclass(kw_only=True)
class ApprovalDecided(CapabilityEvent, namespace="ipybox", name="approval_decided"):
    """A held call was decided: approved (and sent on) or rejected (``PermissionError`` in the code)."""

    approval_id: str
    name: str
    """``server.tool`` or ``shell``."""
    approved: bool
    reason: str | None = None
