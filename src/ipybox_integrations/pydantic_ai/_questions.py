"""An MCP server's question during a call of the code, as a PydanticAI deferred question
(``CodeAction(elicitation=True)``).

The question is a call deferred with ``CallDeferred(kind="question")``: ``requests.kind(id) ==
"question"``, the call named after the MCP tool that asks (arguments: the server's ``message`` and
the form's ``schema``, or the ``url`` to open), ``requests.metadata[id]["elicitation"]`` holding
the question as LangChain's interrupt carries it (:func:`question_metadata`). It is answered in
``DeferredToolResults.calls``, the PydanticAI way for questions, inline by a handler capability or
in the next run: the form's values (a dict) accept them; ``{"action": "accept" | "decline" |
"cancel", "content": {...}}`` (LangChain's resume shape) or an
:class:`~ipybox_core.mcp.elicitation.ElicitationAnswer` say which. Content the form's schema
refuses asks again, with ``error`` naming the value.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeGuard

from pydantic_ai import CallDeferred, RunContext, ToolCallPart, ToolReturn
from pydantic_ai.tool_manager import ToolManager
from pydantic_ai.tools import ToolDefinition
from pydantic_ai.toolsets import AbstractToolset
from pydantic_ai.toolsets.abstract import ToolsetTool
from pydantic_core import SchemaValidator, core_schema

from ipybox_core.approval import ApprovalRequest
from ipybox_core.executor import Execution, ExecutionResult
from ipybox_core.executor.contract import Executor
from ipybox_core.mcp.elicitation import (
    ElicitationAnswer,
    ElicitationContentError,
    ElicitationError,
    ElicitationRequest,
)
from ipybox_integrations._questions import asked_question
from ipybox_integrations.pydantic_ai._deferred_events import announcing
from ipybox_integrations.pydantic_ai.approvals import SOURCE

QUESTION = "elicitation"
"""The key of the question in its request's metadata."""
ANSWER = "ipybox_question_answer"
"""The key under which a question's answer reaches the resumed ``execute_code`` call."""
ANSWER_SHAPE = (
    "the answer must be the form's values (a dict), {'action': 'accept', 'content': {...}}, "
    "{'action': 'decline'}, {'action': 'cancel'} or an ElicitationAnswer"
)
MAX_REFUSED = 5
"""Inline answers a question's schema may refuse before it is declined (a handler answering wrongly
would otherwise be asked forever)."""
_ACTIONS = ("accept", "decline", "cancel")
_ARGS_VALIDATOR = SchemaValidator(core_schema.dict_schema(core_schema.str_schema(), core_schema.any_schema()))


def question_metadata(question: ElicitationRequest, call_id: str, error: str | None = None) -> dict[str, Any]:
    """The metadata of the deferred question (JSON-serialisable)."""
    return {"source": SOURCE, QUESTION: dict(asked_question(question, call_id, error))}


def is_question(metadata: object) -> TypeGuard[Mapping[str, Any]]:
    """True for the metadata of a question ipybox deferred."""
    return isinstance(metadata, Mapping) and metadata.get("source") == SOURCE and QUESTION in metadata


def question_call(tool_call_id: str, metadata: Mapping[str, Any]) -> ToolCallPart:
    """The question as a tool call: named after the MCP tool that asks, the question as arguments."""
    asked = metadata[QUESTION]
    args = {key: asked[key] for key in ("message", "schema", "url", "error") if key in asked}
    return ToolCallPart(asked["tool"] or asked["server"], args, tool_call_id=tool_call_id)


def answer_of(value: object) -> ElicitationAnswer | None:
    """The answer ``value`` stands for (``None``: not an answer, see :data:`ANSWER_SHAPE`)."""
    if isinstance(value, ToolReturn):
        value = value.return_value
    if isinstance(value, ElicitationAnswer):
        return value
    if not isinstance(value, Mapping):
        return None
    action = value.get("action")
    if action in _ACTIONS and set(value) <= {"action", "content"}:
        content = value.get("content") or {}
        if not isinstance(content, Mapping):
            return None
        return ElicitationAnswer(action, dict(content))
    return ElicitationAnswer.accept(value)


async def give(question: ElicitationRequest, value: object) -> str | None:
    """Answer ``question`` with ``value``; why it was refused (the question stays open), else ``None``."""
    answer = answer_of(value)
    if answer is None:
        return ANSWER_SHAPE
    try:
        question.respond(answer)
    except ElicitationContentError as error:
        return f"the content does not match the requested schema: {error}"
    except ElicitationError:  # withdrawn meanwhile (its call ended): nothing to answer
        return None
    return None


async def found_asking(
    executor: Executor, call_id: str
) -> tuple[Execution, ApprovalRequest | ElicitationRequest | ExecutionResult] | None:
    """``found_again`` that stops at the question the execution waits on (instead of declining it)."""
    execution = await executor.reattach(call_id)
    return None if execution is None else (execution, await execution.next_stop(questions=True))


class _QuestionToolset(AbstractToolset[Any]):
    """The question as the only tool of a toolset; the tool defers as a question until answered."""

    def __init__(self, tool_def: ToolDefinition, metadata: dict[str, Any]) -> None:
        self.tool_def = tool_def
        self.metadata = metadata

    @property
    def id(self) -> str:
        return "ipybox_question"

    async def get_tools(self, ctx: RunContext[Any]) -> dict[str, ToolsetTool[Any]]:
        tool = ToolsetTool(
            toolset=self, tool_def=self.tool_def, max_retries=0, args_validator=_ARGS_VALIDATOR
        )
        return {self.tool_def.name: tool}

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any], tool: ToolsetTool[Any]
    ) -> Any:
        raise CallDeferred(metadata=self.metadata, kind="question")


async def ask_inline(ctx: RunContext[Any], call: ToolCallPart, metadata: dict[str, Any]) -> Any:
    """Put the question to the run's handler capabilities; their answer (raises ``CallDeferred``
    when none answered)."""
    tool_def = ToolDefinition(
        name=call.tool_name,
        description=str(metadata[QUESTION]["message"]),
        parameters_json_schema={"type": "object", "additionalProperties": True},
        metadata={"ipybox": metadata},
    )
    toolset = _QuestionToolset(tool_def, metadata)
    root = ctx.tool_manager.root_capability if ctx.tool_manager is not None else ctx.root_capability
    manager = ToolManager(toolset=toolset, root_capability=root, ctx=ctx, tools=await toolset.get_tools(ctx))
    return await manager.handle_call(call, wrap_validation_errors=False, **announcing(ctx, root))
