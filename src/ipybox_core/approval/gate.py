"""The approval gate: every held call passes through here before it may reach an MCP server."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from ipybox_core.approval.audit import AuditLog
from ipybox_core.approval.policy import ApprovalPolicy, ApprovalRules, apply_policy, check_policy
from ipybox_core.approval.request import ApprovalDecision, ApprovalRequest

ApprovalListener = Callable[[ApprovalRequest], None]
"""Receives requests the application must decide (the running execution's event stream)."""

NO_LISTENER_REASON = "no execution is active to approve this call (it was made outside of a running cell)"


class ApprovalGate:
    """Applies the policy, asks the listener when needed, enforces the approval timeout, audits.

    Lives in the application process; kernel code can only ask. ``timeout`` (seconds) rejects a
    request nobody answered in time.
    """

    def __init__(
        self,
        policy: ApprovalPolicy = "always",
        *,
        timeout: float | None = None,
        audit: AuditLog | None = None,
    ) -> None:
        check_policy(policy)
        self.policy = policy
        self.timeout = timeout
        self.audit = audit
        self._listener: ApprovalListener | None = None

    @property
    def never_asks(self) -> bool:
        """Whether the policy decides every request by itself: none can reach the listener (the
        kernel's runtime then leaves the output mark, which only orders surfaced requests, out)."""
        policy = self.policy
        return policy == "never" or (isinstance(policy, ApprovalRules) and policy.default != "ask")

    def listen(self, listener: ApprovalListener | None) -> None:
        """Route requests needing a decision to ``listener`` (``None``: reject them)."""
        self._listener = listener

    async def decide(self, request: ApprovalRequest) -> ApprovalDecision:
        """The decision for ``request``; cancelling the caller abandons the request."""
        decision = await apply_policy(self.policy, request)
        if decision is not None:
            request.resolve(decision)
        elif self._listener is None:
            decision = ApprovalDecision(approved=False, decided_by="no-listener", reason=NO_LISTENER_REASON)
            request.resolve(decision)
        else:
            self._listener(request)
            try:
                decision = await request.wait(self.timeout)
            except asyncio.CancelledError:
                await self._audit(request, ApprovalDecision(False, "abandoned", "the code stopped waiting"))
                raise
        await self._audit(request, decision)
        return decision

    async def note(self, request: ApprovalRequest, message: str) -> None:
        """Record a notice about ``request``'s call in the audit log (if any), off the event loop."""
        if self.audit is not None:
            await asyncio.shield(asyncio.to_thread(self.audit.note, request, message))

    async def _audit(self, request: ApprovalRequest, decision: ApprovalDecision) -> None:
        """Record the decision in a worker thread: no file is opened on the event loop."""
        if self.audit is not None:
            await asyncio.shield(asyncio.to_thread(self.audit.record, request, decision))
