"""Approval requests of kernel code as PydanticAI sees them, and the decisions an application sends back.

Every MCP call (or approved shell command) the code makes becomes a PydanticAI approval request
whose metadata describes the call (see :func:`request_metadata`). It reaches the application in one
of two ways:

- **inline**: a handler capability (``HandleDeferredToolCalls``, ``RequestInput``, ...) gets a
  ``DeferredToolRequests`` whose one approval is a nested tool call named after the MCP tool, with
  the call's arguments; the run goes on with its answer.
- **deferred**: no handler answers, the run ends with ``DeferredToolRequests`` whose approval is
  keyed by the ``execute_code`` call id but named after the MCP tool, with its arguments
  (:func:`named_requests`); the kernel waits, and the application answers in the next run the
  PydanticAI way: ``True`` / ``ToolApproved(override_args=...)`` send the call (edited),
  ``False`` / ``ToolDenied(message)`` reject it (``PermissionError(message)`` in the code).

:func:`pending_approvals` reads either form; :func:`approval_results` builds the answer for either
and binds a deferred answer to the one held call it decides (its ``approval_id``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic_ai import DeferredToolRequests, DeferredToolResults, ToolApproved, ToolCallPart, ToolDenied

from ipybox_core.approval import ApprovalRequest
from ipybox_integrations._session import approval_description

SOURCE = "ipybox"
"""Value of the ``source`` key in the metadata of every approval request made by ipybox."""

DEFAULT_REJECT_REASON = "the user rejected this call"
DEFAULT_ABORT_MESSAGE = "The user stopped this code execution; the kernel was interrupted."


@dataclass(frozen=True)
class PendingApproval:
    """One call of kernel code waiting for a decision."""

    tool_call_id: str
    """The id to answer in ``DeferredToolResults`` (the nested call inline, ``execute_code`` deferred)."""
    approval_id: str
    """Unique per held call: a deferred answer must echo it, so a stale answer cannot approve another call."""
    kind: Literal["mcp", "shell"]
    server: str
    """The MCP server (``""`` for shell commands)."""
    tool: str
    """The MCP tool name (``"shell"`` for shell commands)."""
    args: dict[str, Any]
    description: str
    """One line for a human approver."""
    execute_code_call_id: str
    """The ``execute_code`` call whose code made this call."""
    read_only: bool | None = None
    destructive: bool | None = None
    inline: bool = False
    """True when a handler capability is asked during the run; False for a deferred request."""

    @property
    def name(self) -> str:
        """``server.tool`` for MCP calls, ``shell`` for shell commands."""
        return f"{self.server}.{self.tool}" if self.kind == "mcp" else "shell"

    @property
    def hints(self) -> list[str]:
        """The tool's annotations worth showing an approver: ``"read-only"``, ``"destructive"``."""
        return [
            name for name, flag in (("read-only", self.read_only), ("destructive", self.destructive)) if flag
        ]


@dataclass(frozen=True)
class Decision:
    """An answer to a :class:`PendingApproval`.

    - ``approve``: the call goes through (with ``arguments`` replacing the call's arguments, if given);
    - ``reject``: the call raises ``PermissionError(reason)`` in the code, which may catch it and go on;
    - ``abort``: the whole ``execute_code`` call is denied (``ToolDenied``) and the kernel interrupted.
      Only deferred requests can be aborted; inline, ``abort`` acts like ``reject``.
    """

    action: Literal["approve", "reject", "abort"]
    reason: str | None = None
    arguments: dict[str, Any] | None = None

    @classmethod
    def approve(cls, arguments: dict[str, Any] | None = None) -> Decision:
        return cls("approve", arguments=arguments)

    @classmethod
    def reject(cls, reason: str = DEFAULT_REJECT_REASON) -> Decision:
        return cls("reject", reason=reason)

    @classmethod
    def abort(cls, message: str = DEFAULT_ABORT_MESSAGE) -> Decision:
        return cls("abort", reason=message)


DecisionLike = Decision | bool
"""A :class:`Decision`, or ``True`` (approve) / ``False`` (reject with the default reason)."""

Decider = Mapping[str, DecisionLike] | Callable[[PendingApproval], DecisionLike]
"""Decisions keyed by :attr:`PendingApproval.tool_call_id`, or a function deciding each approval."""


def request_metadata(
    request: ApprovalRequest, *, execute_code_call_id: str, tool_call_id: str
) -> dict[str, Any]:
    """The metadata of the PydanticAI approval request for ``request`` (JSON-serialisable)."""
    return {
        "source": SOURCE,
        "approval_id": request.id,
        "kind": request.kind,
        "server": request.server,
        "tool": request.tool,
        "args": dict(request.args),
        "description": approval_description(request),
        "read_only": request.annotations.read_only_hint,
        "destructive": request.annotations.destructive_hint,
        "execute_code_call_id": execute_code_call_id,
        "nested_tool_call_id": tool_call_id,
    }


def pending_approvals(requests: DeferredToolRequests) -> list[PendingApproval]:
    """The approvals in ``requests`` that ipybox made (other deferred calls are left out)."""
    found = []
    for call in requests.approvals:
        metadata = requests.metadata.get(call.tool_call_id) or {}
        if metadata.get("source") == SOURCE:
            found.append(pending_approval(call.tool_call_id, metadata))
    return found


def pending_approval(tool_call_id: str, metadata: Mapping[str, Any]) -> PendingApproval:
    """Read the :func:`request_metadata` of the request with id ``tool_call_id``."""
    return PendingApproval(
        tool_call_id=tool_call_id,
        approval_id=str(metadata["approval_id"]),
        kind=metadata["kind"],
        server=metadata["server"],
        tool=metadata["tool"],
        args=dict(metadata["args"]),
        description=metadata["description"],
        execute_code_call_id=metadata["execute_code_call_id"],
        read_only=metadata.get("read_only"),
        destructive=metadata.get("destructive"),
        inline=tool_call_id == metadata.get("nested_tool_call_id"),
    )


def approval_results(requests: DeferredToolRequests, decide: Decider) -> DeferredToolResults:
    """Answer ipybox's approval requests in ``requests``, inline or deferred alike.

    ``decide`` maps :attr:`PendingApproval.tool_call_id` to a decision, or is called with each
    :class:`PendingApproval`. Approvals without a decision (and deferred calls ipybox did not
    make) are left out: merge their answers in with ``DeferredToolResults.update``.
    """
    pending = pending_approvals(requests)
    if isinstance(decide, Mapping):
        unknown = set(decide) - {approval.tool_call_id for approval in pending}
        if unknown:
            raise ValueError(f"no pending ipybox approval has the tool call id(s) {sorted(unknown)}")
    results = DeferredToolResults()
    for approval in pending:
        if isinstance(decide, Mapping):
            if approval.tool_call_id not in decide:
                continue
            decision = _as_decision(decide[approval.tool_call_id])
        else:
            decision = _as_decision(decide(approval))
        _add_answer(results, approval, decision)
    return results


def _as_decision(value: DecisionLike) -> Decision:
    if isinstance(value, Decision):
        return value
    if isinstance(value, bool):
        return Decision.approve() if value else Decision.reject()
    raise TypeError(f"a decision must be a Decision or a bool, not {type(value).__name__}")


def _add_answer(results: DeferredToolResults, approval: PendingApproval, decision: Decision) -> None:
    key = approval.tool_call_id
    if approval.inline:
        if decision.action == "approve":
            results.approvals[key] = ToolApproved(override_args=decision.arguments)
        else:
            results.approvals[key] = ToolDenied(decision.reason or DEFAULT_REJECT_REASON)
        return
    if decision.action == "abort":
        results.approvals[key] = ToolDenied(decision.reason or DEFAULT_ABORT_MESSAGE)
        results.metadata[key] = {"approval_id": approval.approval_id, "decision": "abort"}
        return
    results.approvals[key] = ToolApproved()
    answer: dict[str, Any] = {"approval_id": approval.approval_id, "decision": decision.action}
    if decision.action == "reject":
        answer["reason"] = decision.reason or DEFAULT_REJECT_REASON
    elif decision.arguments is not None:
        answer["arguments"] = dict(decision.arguments)
    results.metadata[key] = answer


def named_requests(requests: DeferredToolRequests) -> DeferredToolRequests:
    """``requests`` with each deferred ipybox approval named after the MCP call it holds, and each
    deferred question after the MCP tool that asks it.

    The id stays the ``execute_code`` call's (the one PydanticAI resumes); the tool name and
    arguments become the MCP tool's, so ``requests.approvals`` reads as the call to decide (and
    ``requests.calls`` as the question, its arguments the message and the form).
    """
    from ipybox_integrations.pydantic_ai._questions import is_question, question_call  # (a cycle)

    approvals = []
    for call in requests.approvals:
        metadata = requests.metadata.get(call.tool_call_id) or {}
        if metadata.get("source") == SOURCE and call.tool_call_id != metadata.get("nested_tool_call_id"):
            call = ToolCallPart(metadata["tool"], dict(metadata["args"]), tool_call_id=call.tool_call_id)
        approvals.append(call)
    calls = [
        question_call(call.tool_call_id, asked)
        if is_question(asked := requests.metadata.get(call.tool_call_id))
        else call
        for call in requests.calls
    ]
    return dataclasses.replace(requests, approvals=approvals, calls=calls)


def deferred_answer(result: object, answer: Mapping[str, Any] | None) -> dict[str, Any]:
    """The ipybox answer a PydanticAI approval result for a held call stands for.

    ``ToolApproved(override_args=...)`` edits the MCP call, ``ToolDenied(message)`` rejects it
    with ``message``; an answer :func:`approval_results` built (with its ``approval_id``) is kept.
    """
    answer = dict(answer or {})
    if isinstance(result, ToolDenied):
        return {**answer, "decision": "reject", "reason": result.message}
    answer.setdefault("decision", "approve")
    if isinstance(result, ToolApproved) and result.override_args is not None:
        answer["arguments"] = dict(result.override_args)
    return answer
