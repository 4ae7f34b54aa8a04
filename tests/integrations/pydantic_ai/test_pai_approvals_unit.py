"""The decision helper, construction errors and the missing-dependency message (no kernel needed)."""

from __future__ import annotations

import importlib
import sys

import pytest
from pydantic_ai import DeferredToolRequests, ToolApproved, ToolCallPart, ToolDenied

from ipybox_core import CodeExecutor
from ipybox_integrations.pydantic_ai import CodeAction, Decision, approval_results, pending_approvals
from ipybox_integrations.pydantic_ai.approvals import DEFAULT_REJECT_REASON


def ipybox_metadata(call_id: str, nested: str, approval_id: str = "a" * 32) -> dict[str, object]:
    return {
        "source": "ipybox",
        "approval_id": approval_id,
        "kind": "mcp",
        "server": "shop",
        "tool": "place_order",
        "args": {"product_id": "b-101"},
        "description": "The code calls MCP tool shop.place_order: place_order(product_id='b-101')",
        "read_only": None,
        "destructive": True,
        "execute_code_call_id": call_id,
        "nested_tool_call_id": nested,
    }


def deferred_requests() -> DeferredToolRequests:
    """An execute_code call waiting (deferred) plus another tool's approval ipybox did not make."""
    return DeferredToolRequests(
        approvals=[
            ToolCallPart("execute_code", {"code": "..."}, tool_call_id="exec"),
            ToolCallPart("delete_everything", {}, tool_call_id="other"),
        ],
        metadata={"exec": ipybox_metadata("exec", "exec__aaaa")},
    )


def inline_requests() -> DeferredToolRequests:
    return DeferredToolRequests(
        approvals=[ToolCallPart("place_order", {"product_id": "b-101"}, tool_call_id="exec__aaaa")],
        metadata={"exec__aaaa": ipybox_metadata("exec", "exec__aaaa")},
    )


def test_pending_approvals_reads_only_ipybox_requests() -> None:
    (approval,) = pending_approvals(deferred_requests())
    assert approval.name == "shop.place_order"
    assert approval.args == {"product_id": "b-101"}
    assert approval.destructive is True
    assert not approval.inline
    (inline,) = pending_approvals(inline_requests())
    assert inline.inline


def test_deferred_answers_carry_the_approval_id() -> None:
    approve = approval_results(deferred_requests(), {"exec": Decision.approve(arguments={"product_id": "x"})})
    assert approve.approvals == {"exec": ToolApproved()}
    assert approve.metadata == {
        "exec": {"approval_id": "a" * 32, "decision": "approve", "arguments": {"product_id": "x"}}
    }

    reject = approval_results(deferred_requests(), lambda a: False)
    assert reject.approvals == {"exec": ToolApproved()}  # the code goes on and sees PermissionError
    assert reject.metadata["exec"] == {
        "approval_id": "a" * 32,
        "decision": "reject",
        "reason": DEFAULT_REJECT_REASON,
    }

    abort = approval_results(deferred_requests(), {"exec": Decision.abort("stop")})
    assert abort.approvals == {"exec": ToolDenied("stop")}
    assert abort.metadata == {"exec": {"approval_id": "a" * 32, "decision": "abort"}}  # stays a denial


def test_inline_answers_use_pydantic_ai_approvals() -> None:
    edited = approval_results(inline_requests(), lambda a: Decision.approve(arguments={"product_id": "y"}))
    assert edited.approvals == {"exec__aaaa": ToolApproved(override_args={"product_id": "y"})}
    denied = approval_results(inline_requests(), {"exec__aaaa": Decision.reject("too expensive")})
    assert denied.approvals == {"exec__aaaa": ToolDenied("too expensive")}


def test_bad_decisions_are_refused() -> None:
    with pytest.raises(ValueError, match="other"):
        approval_results(deferred_requests(), {"other": True})  # not an ipybox approval
    with pytest.raises(TypeError, match="Decision or a bool"):
        approval_results(deferred_requests(), lambda a: "yes")  # type: ignore[arg-type,return-value]
    assert approval_results(deferred_requests(), {}).approvals == {}


def test_an_executor_and_executor_options_are_exclusive() -> None:
    with pytest.raises(TypeError, match="either an executor or the options"):
        CodeAction(CodeExecutor(), workspace="ws")
    code_action = CodeAction(CodeExecutor())
    assert code_action != CodeAction(code_action.executor)  # one capability is one kernel
    assert code_action.get_toolset().id == "ipybox_code_action"
    assert CodeAction(code_action.executor, id="b").get_toolset().id == "ipybox_code_action_b"


def test_missing_pydantic_ai_gives_an_install_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(sys.modules):
        if name == "ipybox_integrations.pydantic_ai" or name.startswith("ipybox_integrations.pydantic_ai."):
            monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "pydantic_ai", None)  # makes `import pydantic_ai` fail
    with pytest.raises(ImportError, match=r"in an ipybox checkout: pip install -e '\.\[pydantic-ai\]'"):
        importlib.import_module("ipybox_integrations.pydantic_ai")
