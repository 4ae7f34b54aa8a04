"""The approval gate: every held call passes through here before it may reach an MCP server."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable

from ipybox_core.approval.audit import AuditLog
from ipybox_core.approval.policy import ApprovalPolicy, ApprovalRules, apply_policy, check_policy
from ipybox_core.approval.request import ApprovalDecision, ApprovalRequest, CallOutcome

ApprovalListener = Callable[[ApprovalRequest], None]
"""Receives requests the application must decide (the running execution's event stream)."""
BeforeCall = Callable[[ApprovalRequest], "str | Awaitable[str | None] | None"]
"""Consulted for each call before the policy: a reason refuses the call (``None`` lets it on); it
may be async (over the service, the check is a round with the client)."""
CallListener = Callable[[ApprovalRequest, ApprovalDecision, CallOutcome], None]
"""Receives each decided tool call once it is over (its decision and outcome)."""

NO_LISTENER = "no-listener"
"""``decided_by`` of a request nobody could be asked about (no running execution, a client that
cannot ask its user)."""
NO_LISTENER_REASON = "no execution is active to approve this call (it was made outside of a running cell)"

MAX_PENDING_APPROVALS = 16
"""Requests one gate (one kernel) lets wait for the application's decision at once. Honest code has
one per thread that calls a tool; beyond the limit a request is refused at once (decided by
:data:`LIMIT_DECIDER`), so what waiting requests hold stays in proportion to it."""

BEFORE_CALL_DECIDER = "before-call"
"""``decided_by`` of a call refused by the execution's ``before_call`` check (e.g. a usage limit)."""
LIMIT_DECIDER = "limit"
"""``decided_by`` of a request refused because :data:`MAX_PENDING_APPROVALS` were waiting."""
_ABANDONED = ApprovalDecision(False, "abandoned", "the code stopped waiting")


def _too_many(limit: int) -> str:
    return (
        f"too many approval requests are waiting at once: this kernel may have at most {limit} "
        "waiting for a decision (max_pending); wait for the earlier calls to be decided"
    )


class ApprovalGate:
    """Applies the policy, asks the listener when needed, enforces the approval timeout, audits.

    Lives in the application process; kernel code can only ask. ``timeout`` (seconds) rejects a
    request nobody answered in time; at most ``max_pending`` requests wait for the listener at
    once, more are refused at once. Audit records are written one at a time, in order.
    """

    def __init__(
        self,
        policy: ApprovalPolicy = "always",
        *,
        timeout: float | None = None,
        audit: AuditLog | None = None,
        max_pending: int = MAX_PENDING_APPROVALS,
    ) -> None:
        check_policy(policy)
        if max_pending < 1:
            raise ValueError(f"max_pending must be at least 1, got {max_pending!r}")
        self.policy = policy
        self.timeout = timeout
        self.audit = audit
        self.max_pending = max_pending
        self._listener: ApprovalListener | None = None
        self._before_call: BeforeCall | None = None
        self._on_call: CallListener | None = None
        self._waiting = 0
        self._auditing = asyncio.Lock()  # one record at a time: a large call's arguments parsed once

    @property
    def never_asks(self) -> bool:
        """Whether the policy decides every request by itself: none can reach the listener (the
        kernel's runtime then leaves the output mark, which only orders surfaced requests, out)."""
        policy = self.policy
        return policy == "never" or (isinstance(policy, ApprovalRules) and policy.default != "ask")

    def listen(self, listener: ApprovalListener | None) -> None:
        """Route requests needing a decision to ``listener`` (``None``: reject them)."""
        self._listener = listener

    def observe(self, before_call: BeforeCall | None, on_call: CallListener | None) -> None:
        """Check each call with ``before_call`` before the policy decides it, and report each
        decided tool call to ``on_call`` when it is over (``None``: neither)."""
        self._before_call = before_call
        self._on_call = on_call

    def report(self, request: ApprovalRequest, outcome: CallOutcome) -> None:
        """Called by whoever ran a decided tool call (the tool server) once it is over."""
        decision = request.decision
        if self._on_call is not None and decision is not None:
            self._on_call(request, decision, outcome)

    async def decide(self, request: ApprovalRequest) -> ApprovalDecision:
        """The decision for ``request``; cancelling the caller abandons the request."""
        refusal = await self._check(request)
        decision = (
            ApprovalDecision(False, BEFORE_CALL_DECIDER, refusal)
            if refusal is not None
            else await apply_policy(self.policy, request)
        )
        if decision is not None:
            request.resolve(decision)
        elif self._listener is None:
            decision = ApprovalDecision(approved=False, decided_by=NO_LISTENER, reason=NO_LISTENER_REASON)
            request.resolve(decision)
        elif self._waiting >= self.max_pending:
            decision = ApprovalDecision(False, LIMIT_DECIDER, _too_many(self.max_pending))
            request.resolve(decision)
        else:
            try:
                decision = await self._ask(self._listener, request)
            except asyncio.CancelledError:
                await self._audit(request, _ABANDONED)
                raise
        await self._audit(request, decision)
        return decision

    async def _check(self, request: ApprovalRequest) -> str | None:
        """``before_call``'s refusal of ``request`` (``None``: it goes on to the policy)."""
        refusal = self._before_call(request) if self._before_call is not None else None
        if not inspect.isawaitable(refusal):
            return refusal
        try:
            return await refusal
        except asyncio.CancelledError:
            await self._audit(request, _ABANDONED)
            raise

    async def _ask(self, listener: ApprovalListener, request: ApprovalRequest) -> ApprovalDecision:
        self._waiting += 1
        try:
            listener(request)
            return await request.wait(self.timeout)
        finally:
            self._waiting -= 1

    @property
    def waiting(self) -> int:
        """Requests waiting for the listener's decision now."""
        return self._waiting

    async def note(self, request: ApprovalRequest, message: str) -> None:
        """Record a notice about ``request``'s call in the audit log (if any), off the event loop."""
        if self.audit is not None:
            await asyncio.shield(self._in_order(self.audit.note, request, message))

    async def _audit(self, request: ApprovalRequest, decision: ApprovalDecision) -> None:
        """Record the decision in a worker thread: no file is opened on the event loop."""
        if self.audit is not None:
            await asyncio.shield(self._in_order(self.audit.record, request, decision))

    async def _in_order(self, write: Callable[..., object], *args: object) -> None:
        """Run ``write`` in a worker thread after the gate's earlier writes (each record parses its
        call's arguments: at most one such parse per gate at a time)."""
        async with self._auditing:
            await asyncio.to_thread(write, *args)
