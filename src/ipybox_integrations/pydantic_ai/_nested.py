"""A held kernel call dispatched as a nested PydanticAI tool call.

The call (``place_order(product_id=...)``) becomes a one-tool toolset whose tool, when "executed",
lets the held call through. Dispatching it with ``ToolManager.handle_call`` puts it through
PydanticAI's own approval machinery: the tool raises ``ApprovalRequired``, the run's handler
capabilities (``HandleDeferredToolCalls``, ``RequestInput``, ...) are asked, tool hooks of other
capabilities see the call, and ``ToolApproved(override_args=...)`` edits its arguments. When no
handler answers, ``ApprovalRequired`` propagates to the caller.
"""

from __future__ import annotations

from typing import Any

from pydantic_ai import ApprovalRequired, RunContext, ToolCallPart, ToolDenied
from pydantic_ai.tool_manager import ToolManager
from pydantic_ai.tools import ToolDefinition
from pydantic_ai.toolsets import AbstractToolset
from pydantic_ai.toolsets.abstract import ToolsetTool
from pydantic_core import SchemaValidator, core_schema

from ipybox_core.approval import ApprovalRequest
from ipybox_integrations._outcomes import UNREPORTED, outcome_error, outcome_value
from ipybox_integrations.pydantic_ai._deferred_events import announcing

_ARGS_VALIDATOR = SchemaValidator(core_schema.dict_schema(core_schema.str_schema(), core_schema.any_schema()))


class HeldCallToolset(AbstractToolset[Any]):
    """The held call as the only tool of a toolset; running the tool approves the call."""

    def __init__(
        self,
        request: ApprovalRequest,
        tool_def: ToolDefinition,
        metadata: dict[str, Any],
        *,
        outcome: bool = True,
    ) -> None:
        self.request = request
        self.tool_def = tool_def
        self.metadata = metadata
        self.outcome = outcome

    @property
    def id(self) -> str:
        return "ipybox_held_call"

    async def get_tools(self, ctx: RunContext[Any]) -> dict[str, ToolsetTool[Any]]:
        tool = ToolsetTool(
            toolset=self,
            tool_def=self.tool_def,
            max_retries=0,
            args_validator=_ARGS_VALIDATOR,
            args_validator_func=self._ask_unless_approved,
        )
        return {self.tool_def.name: tool}

    def _ask_unless_approved(self, ctx: RunContext[Any], **arguments: Any) -> None:
        # Deferred while validating, as PydanticAI defers a ``requires_approval`` tool: the call
        # is only executed (one ``execute_tool`` span) once it is approved.
        if not ctx.tool_call_approved:
            raise ApprovalRequired(metadata=self.metadata)

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any], tool: ToolsetTool[Any]
    ) -> Any:
        if self.request.pending:
            edited = None if tool_args == self.request.args else dict(tool_args)
            await self.request.accept(arguments=edited)
        # The span and the tool result of this call are what the MCP tool returned, as for a
        # native tool (where the outcome is not reported: that it was sent).
        outcome = await self.request.outcome() if self.outcome else None
        if outcome is None:
            return UNREPORTED
        return outcome_value(outcome) if outcome.ok else outcome_error(outcome)


async def dispatch_held_call(
    ctx: RunContext[Any],
    request: ApprovalRequest,
    call: ToolCallPart,
    metadata: dict[str, Any],
    *,
    description: str,
    approved: bool = False,
    outcome: bool = True,
) -> ToolDenied | None:
    """Put ``call`` through the run's approval machinery; ``ToolDenied`` if a handler denied it.

    Returns ``None`` once the call was let through. ``outcome=False``: the nested call's result is
    that the call was sent, not the MCP tool's result (waiting for it would block the execution's
    next event, e.g. the server's question that the result waits on). Raises ``ApprovalRequired`` when nothing
    resolved it (the caller defers), and whatever handlers or hooks raise.
    """
    tool_def = ToolDefinition(
        name=call.tool_name,
        description=description,
        parameters_json_schema={"type": "object", "additionalProperties": True},
        metadata={"ipybox": metadata},
    )
    toolset = HeldCallToolset(request, tool_def, metadata, outcome=outcome)
    root = ctx.tool_manager.root_capability if ctx.tool_manager is not None else ctx.root_capability
    manager = ToolManager(toolset=toolset, root_capability=root, ctx=ctx, tools=await toolset.get_tools(ctx))
    handled = await manager.handle_call(
        call, approved=approved, wrap_validation_errors=False, **announcing(ctx, root)
    )
    return handled if isinstance(handled, ToolDenied) else None
