"""Which calls need a human decision: ``"always"``, ``"never"``, a callable, or rules."""

from __future__ import annotations

import fnmatch
import inspect
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Literal, TypeAlias

from ipybox_core.approval.request import ApprovalDecision, ApprovalRequest
from ipybox_core.errors import ConfigError

RuleAction = Literal["ask", "allow", "deny"]


@dataclass(frozen=True)
class ApprovalRules:
    """Allow- and deny-lists over ``server.tool`` names, with a default for everything else.

    Patterns are shell-style globs: ``"github.search_*"``, ``"fs.*"``, ``"*.read_*"``. Shell commands
    are matched as ``"shell:<command line>"`` (``"shell:ls *"``). ``deny`` wins over ``allow``;
    ``allow_read_only`` auto-approves MCP tools annotated ``readOnlyHint: true`` — a hint from the
    server, so only use it for servers you trust.
    """

    allow: Sequence[str] = ()
    deny: Sequence[str] = ()
    allow_read_only: bool = False
    default: RuleAction = "ask"

    def match(self, request: ApprovalRequest) -> tuple[RuleAction, str]:
        """The action for ``request`` and the reason (which rule matched)."""
        key = request.name if request.kind == "mcp" else f"shell:{request.args.get('command', '')}"
        for pattern in self.deny:
            if fnmatch.fnmatchcase(key, pattern):
                return "deny", f"policy:deny {pattern}"
        for pattern in self.allow:
            if fnmatch.fnmatchcase(key, pattern):
                return "allow", f"policy:allow {pattern}"
        if self.allow_read_only and request.kind == "mcp" and request.annotations.read_only_hint:
            return "allow", "policy:read-only"
        return self.default, f"policy:default {self.default}"


PolicyCallable: TypeAlias = Callable[[ApprovalRequest], "bool | Awaitable[bool | None] | None"]
"""Returns True (approve), False (reject) or None (ask the application); may be async."""

ApprovalPolicy: TypeAlias = "Literal['always', 'never'] | ApprovalRules | PolicyCallable | NarrowedPolicy"

CLIENT_RULE = "policy:client "
"""How the audit log names a rule of a client's narrowing rules: ``policy:client deny shop.*``."""
_STRICTNESS: dict[RuleAction, int] = {"allow": 0, "ask": 1, "deny": 2}


@dataclass(frozen=True)
class NarrowedPolicy:
    """A policy that ``rules`` (a client's) can only make stricter, never looser: the stricter of
    the two decides (``deny`` over ``ask`` over ``allow``; a tie goes to ``base``). So a call
    ``base`` allows is asked or denied when ``rules`` say so, and nothing ``base`` asks about or
    denies is ever allowed by ``rules``. A decision of ``rules`` is audited as ``policy:client <rule>``."""

    base: ApprovalPolicy
    rules: ApprovalRules


async def _narrowed(policy: NarrowedPolicy, request: ApprovalRequest) -> ApprovalDecision | None:
    decision = await apply_policy(policy.base, request)
    base: RuleAction = "ask" if decision is None else ("allow" if decision.approved else "deny")
    action, rule = policy.rules.match(request)
    if _STRICTNESS[action] <= _STRICTNESS[base]:
        return decision
    decided_by = CLIENT_RULE + rule.removeprefix("policy:")
    if action == "ask":
        return None
    return ApprovalDecision(approved=False, decided_by=decided_by, reason=f"denied by {decided_by}")


async def apply_policy(policy: ApprovalPolicy, request: ApprovalRequest) -> ApprovalDecision | None:
    """Decide ``request`` from the policy alone, or return ``None`` when the application must decide."""
    if policy == "always":
        return None
    if policy == "never":
        return ApprovalDecision(approved=True, decided_by="policy:never")
    if isinstance(policy, NarrowedPolicy):
        return await _narrowed(policy, request)
    if isinstance(policy, ApprovalRules):
        action, reason = policy.match(request)
        if action == "ask":
            return None
        if action == "allow":
            return ApprovalDecision(approved=True, decided_by=reason)
        return ApprovalDecision(approved=False, decided_by=reason, reason=f"denied by {reason}")
    if callable(policy):
        verdict = policy(request)
        if inspect.isawaitable(verdict):
            verdict = await verdict
        if verdict is None:
            return None
        if verdict:
            return ApprovalDecision(approved=True, decided_by="policy:callable")
        return ApprovalDecision(
            approved=False, decided_by="policy:callable", reason="denied by the approval policy"
        )
    raise ConfigError(
        f"invalid approval policy {policy!r}: use 'always', 'never', ApprovalRules or a callable"
    )


def check_policy(policy: object) -> None:
    """Raise :class:`ConfigError` early for a policy that :func:`apply_policy` would refuse."""
    if isinstance(policy, NarrowedPolicy):
        check_policy(policy.base)
        return
    if policy in ("always", "never") or isinstance(policy, ApprovalRules) or callable(policy):
        return
    raise ConfigError(
        f"invalid approval policy {policy!r}: use 'always', 'never', ApprovalRules or a callable"
    )
