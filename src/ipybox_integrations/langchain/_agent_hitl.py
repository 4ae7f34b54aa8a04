"""The agent's ``HumanInTheLoopMiddleware(interrupt_on=...)`` applied to agent tools called from code.

A call of a tool that ``interrupt_on`` gates (and whose ``when`` predicate, if any, takes the call)
is asked like a held MCP call, with the tool's ``allowed_decisions`` (``respond`` aside: a call
from the code needs the tool's result) and its ``description`` (a string or a factory of
``(tool_call, state, runtime)``); a call of a tool it does not gate runs without asking.
"""

from __future__ import annotations

import dataclasses
from typing import Any, TypeAlias

from langchain.agents.middleware import HumanInTheLoopMiddleware
from langchain.agents.middleware.types import ToolCallRequest
from langchain.tools import ToolRuntime
from langchain_core.messages import ToolCall
from langchain_core.tools import BaseTool
from langgraph.runtime import get_runtime

from ipybox_core.approval import ApprovalRequest, ApprovalRules
from ipybox_core.hosttools import HOST_SERVER
from ipybox_integrations.langchain._hitl import SUPPORTED_DECISIONS, DecisionName, Review

HumanInTheLoop: TypeAlias = HumanInTheLoopMiddleware[Any, Any, Any]


def gated_review(
    hitl: HumanInTheLoop,
    tool: BaseTool | None,
    request: ApprovalRequest,
    runtime: ToolRuntime | None,
    fallback: Review,
) -> Review | None:
    """How ``hitl`` asks about this call of an agent tool; ``None`` when it does not gate it."""
    config = hitl.interrupt_on.get(request.tool)
    if config is None:
        return None
    tool_call = ToolCall(name=request.tool, args=request.args, id=f"ipybox-{request.id}", type="tool_call")
    when = config.get("when")
    if when is not None and runtime is not None:  # without a graph there is nothing to judge: ask
        call_runtime = dataclasses.replace(runtime, tool_call_id=tool_call["id"])
        judged = ToolCallRequest(tool_call=tool_call, tool=tool, state=runtime.state, runtime=call_runtime)
        if not when(judged):
            return None
    allowed: tuple[DecisionName, ...] = tuple(
        name for name in dict.fromkeys(config["allowed_decisions"]) if name in SUPPORTED_DECISIONS
    )
    description = config.get("description")
    if callable(description):
        state: Any = runtime.state if runtime is not None else {}
        description = description(tool_call, state, _graph_runtime(runtime))
    if description is None:
        description = fallback.description
    return Review(allowed or fallback.allowed, description)


def _graph_runtime(runtime: ToolRuntime | None) -> Any:
    """The graph's ``Runtime`` (what a description factory gets), else the tool's ``ToolRuntime``."""
    try:
        return get_runtime()
    except RuntimeError:
        return runtime


def let_through_by_policy(policy: object, hitl: HumanInTheLoop, names: list[str]) -> list[str]:
    """The tools ``hitl`` gates that the executor's approval ``policy`` lets the code call without
    asking (``"never"``, or a rule allowing ``agent_tools.<tool>``), each with the rule: their
    calls from the code never reach ``interrupt_on``. A policy function is not judged."""
    gated = [name for name in names if name in hitl.interrupt_on]
    if policy == "never":
        return [f"{name} (approval='never')" for name in gated]
    if not isinstance(policy, ApprovalRules):
        return []
    found = []
    for name in gated:
        action, reason = policy.match(ApprovalRequest(kind="mcp", server=HOST_SERVER, tool=name, args={}))
        if action == "allow":
            found.append(f"{name} ({reason})")
    return found
