"""Approvals: which kernel calls need a decision, how they are asked, and the audit log."""

from ipybox_core.approval.audit import AuditLog
from ipybox_core.approval.gate import ApprovalGate, ApprovalListener
from ipybox_core.approval.policy import (
    ApprovalPolicy,
    ApprovalRules,
    NarrowedPolicy,
    PolicyCallable,
    RuleAction,
)
from ipybox_core.approval.request import (
    ApprovalDecision,
    ApprovalKind,
    ApprovalRecord,
    ApprovalRequest,
    CallOutcome,
)

__all__ = [
    "ApprovalDecision",
    "ApprovalGate",
    "ApprovalKind",
    "ApprovalListener",
    "ApprovalPolicy",
    "ApprovalRecord",
    "ApprovalRequest",
    "ApprovalRules",
    "AuditLog",
    "CallOutcome",
    "NarrowedPolicy",
    "PolicyCallable",
    "RuleAction",
]
