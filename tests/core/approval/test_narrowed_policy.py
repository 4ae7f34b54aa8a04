"""A client's rules narrow a policy, never widen it: the stricter of the two decides."""

from __future__ import annotations

import pytest

from ipybox_core.approval import ApprovalRequest, ApprovalRules, NarrowedPolicy, RuleAction
from ipybox_core.approval.policy import apply_policy
from ipybox_core.mcp.types import ToolAnnotations


def _outcome(decision: object) -> str:
    if decision is None:
        return "ask"
    return "allow" if getattr(decision, "approved", False) else "deny"


@pytest.mark.parametrize("base", ["allow", "ask", "deny"])
@pytest.mark.parametrize("client", ["allow", "ask", "deny"])
async def test_the_stricter_of_the_service_and_the_client_decides(
    base: RuleAction, client: RuleAction
) -> None:
    request = ApprovalRequest(kind="mcp", server="shop", tool="buy", args={}, annotations=ToolAnnotations())
    policy = NarrowedPolicy(ApprovalRules(default=base), ApprovalRules(default=client))
    decision = await apply_policy(policy, request)
    strictest = max(base, client, key=["allow", "ask", "deny"].index)
    assert _outcome(decision) == strictest
    if decision is not None:
        who = (
            "policy:client default deny" if client == "deny" and base != "deny" else f"policy:default {base}"
        )
        assert decision.decided_by == who


async def test_a_client_deny_names_its_rule_and_a_policy_function_can_be_narrowed() -> None:
    request = ApprovalRequest(kind="mcp", server="shop", tool="buy", args={}, annotations=ToolAnnotations())
    policy = NarrowedPolicy(lambda _: True, ApprovalRules(deny=["shop.b*"], default="allow"))
    decision = await apply_policy(policy, request)
    assert decision is not None and not decision.approved
    assert (decision.decided_by, decision.reason) == (
        "policy:client deny shop.b*",
        "denied by policy:client deny shop.b*",
    )
