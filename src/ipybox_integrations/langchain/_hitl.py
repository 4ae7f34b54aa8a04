"""ipybox approval requests in HumanInTheLoopMiddleware's shapes: ``HITLRequest`` in, ``HITLResponse`` out.

Each MCP call becomes a ``HITLRequest`` with exactly one action (named ``server.tool``), and the
answer is a ``HITLResponse`` with exactly one decision: approve, reject (with an optional message)
or, when allowed, edit (replacement arguments). The same shapes serve LangGraph interrupts and the
approval callback.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Union, cast

from annotated_types import Len
from langchain.agents.middleware.human_in_the_loop import (
    ActionRequest,
    ApproveDecision,
    Decision,
    HITLRequest,
    RejectDecision,
    ReviewConfig,
    ToolApprovalRequest,
)
from pydantic import AfterValidator, Discriminator, TypeAdapter, ValidationError
from typing_extensions import TypedDict

from ipybox_core.approval import ApprovalRequest
from ipybox_core.errors import ApprovalError, ConfigError
from ipybox_core.mcp._schema_import import import_jsonschema
from ipybox_integrations._session import approval_description

TOOL_NAME = "execute_code"

InterruptMode = Literal["batched", "per_call"]
"""How held calls are asked, as in ``HumanInTheLoopMiddleware``: ``batched`` (a ``HITLRequest``,
answered with a ``HITLResponse``) or ``per_call`` (a ``ToolApprovalRequest``, answered with one
decision, keyed by interrupt id or plain)."""

DecisionName = Literal["approve", "edit", "reject"]
"""The decisions ipybox can carry out (``respond`` cannot: an MCP call has no stand-in result)."""

SUPPORTED_DECISIONS: tuple[DecisionName, ...] = ("approve", "edit", "reject")
DEFAULT_REJECT_REASON = "rejected by the reviewer"
EDIT_NOTICE = (
    "Note: a human reviewer edited a tool call of this code before it ran: {name} ran with the "
    "arguments {args}, not the ones the code passed. This was intentional and authorized; the "
    "output below is that of the edited call. Do not re-issue the original call."
)
"""Told to the model before the result of code whose MCP call a reviewer edited (as
``HumanInTheLoopMiddleware`` tells it about an edited tool call)."""

Describe = Callable[[ApprovalRequest], str]
"""Writes the ``description`` of an action request for the human reviewer."""


def check_decisions(allowed: Sequence[str]) -> tuple[DecisionName, ...]:
    """Validate ``allowed_decisions``: a non-empty selection of approve / edit / reject."""
    if isinstance(allowed, str):
        raise ConfigError(f"allowed_decisions must be a sequence of decision names, not {allowed!r}")
    unknown = [name for name in allowed if name not in SUPPORTED_DECISIONS]
    if unknown:
        raise ConfigError(
            f"unsupported decision(s) {unknown}: ipybox can carry out {', '.join(SUPPORTED_DECISIONS)}"
        )
    if not allowed:
        raise ConfigError("allowed_decisions must not be empty")
    return tuple(cast("DecisionName", name) for name in dict.fromkeys(allowed))


def check_mode(mode: str) -> InterruptMode:
    """Validate ``interrupt_mode``: ``batched`` or ``per_call``."""
    if mode not in ("batched", "per_call"):
        raise ConfigError(f"interrupt_mode must be 'batched' or 'per_call', not {mode!r}")
    return cast("InterruptMode", mode)


def decisions_for(request: ApprovalRequest, allowed: tuple[DecisionName, ...]) -> tuple[DecisionName, ...]:
    """The decisions offered for ``request``: editing a shell command is not supported."""
    if request.kind == "shell":
        return tuple(name for name in allowed if name != "edit") or ("approve", "reject")
    return allowed


@dataclass(frozen=True)
class Review:
    """How one held call is put to the reviewer: the decisions offered and the text shown."""

    allowed: tuple[DecisionName, ...]
    description: str


def hitl_request(request: ApprovalRequest, review: Review) -> HITLRequest:
    """The ``HITLRequest`` for one MCP call (or shell command) made by the running code."""
    action = ActionRequest(name=request.name, args=dict(request.args), description=review.description)
    return HITLRequest(
        action_requests=[action],
        review_configs=[ReviewConfig(action_name=request.name, allowed_decisions=list(review.allowed))],
    )


def tool_approval_request(request: ApprovalRequest, call_id: str, review: Review) -> ToolApprovalRequest:
    """The ``per_call`` question for one MCP call (or shell command): a ``ToolApprovalRequest``
    naming the call (``server.tool``) and the ``execute_code`` tool call that made it."""
    return ToolApprovalRequest(
        type="tool_approval",
        tool_call_id=call_id,
        name=request.name,
        args=dict(request.args),
        description=review.description,
    )


def default_description(request: ApprovalRequest) -> str:
    """Describe the call for the reviewer: what the agent's code wants to do."""
    return f"Code run by the agent (execute_code) needs approval. {approval_description(request)}"


def args_schema_of(request: ApprovalRequest) -> str | None:
    """The tool's input schema as a cache key (JSON text) that an edit is checked against."""
    return json.dumps(request.input_schema, sort_keys=True) if request.input_schema else None


@functools.lru_cache(maxsize=512)
def decision_schema(
    action_name: str, allowed: tuple[DecisionName, ...], args_schema: str | None = None
) -> Any:
    """One decision of an allowed kind; an edit must keep the action's name (only the arguments
    can change), and its arguments must match the tool's input schema ``args_schema`` when known.
    The answer to a ``per_call`` question, and each decision of a ``HITLResponse``."""
    typed_dict: Any = TypedDict  # the functional form with computed fields is beyond static typing
    members: list[Any] = []
    for name in allowed:
        if name == "approve":
            members.append(ApproveDecision)
        elif name == "reject":
            members.append(RejectDecision)
        else:
            arguments: Any = dict[str, Any]
            if args_schema is not None:
                arguments = Annotated[dict[str, Any], AfterValidator(_matching(action_name, args_schema))]
            edited = typed_dict("EditedAction", {"name": Literal[action_name], "args": arguments})
            members.append(typed_dict("EditDecision", {"type": Literal["edit"], "edited_action": edited}))
    if len(members) == 1:
        return members[0]
    return Annotated[Union[tuple(members)], Discriminator("type")]  # noqa: UP007


class RefusedEdit(ValueError):
    """Edited arguments the tool's input schema refuses (one line naming each problem)."""


def _matching(action_name: str, args_schema: str) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """A check that edited arguments match the tool's input schema (as the MCP server would)."""
    import_jsonschema()
    import jsonschema  # type: ignore[import-untyped]  # no type information ships with it

    schema = json.loads(args_schema)
    validator = jsonschema.validators.validator_for(schema)(schema)

    def check(arguments: dict[str, Any]) -> dict[str, Any]:
        problems = [
            f"{'.'.join(str(part) for part in error.absolute_path) or '(arguments)'}: {error.message}"
            for error in validator.iter_errors(arguments)
        ]
        if problems:
            raise RefusedEdit(
                f"the edited arguments do not match {action_name}'s input schema: {'; '.join(problems)}"
            )
        return arguments

    return check


@functools.lru_cache(maxsize=512)
def response_schema(
    action_name: str, allowed: tuple[DecisionName, ...], args_schema: str | None = None
) -> type[Any]:
    """A TypedDict for the resume value: exactly one decision of an allowed kind.

    LangGraph validates a resume value against it before saving anything, so a malformed answer
    (or an edit the tool's schema refuses) can simply be given again.
    """
    typed_dict: Any = TypedDict
    decision: Any = decision_schema(action_name, allowed, args_schema)
    decisions: Any = Annotated[list[decision], Len(1, 1)]
    return cast("type[Any]", typed_dict("HITLResponse", {"decisions": decisions}))


@functools.lru_cache(maxsize=512)
def _adapter(
    action_name: str, allowed: tuple[DecisionName, ...], per_call: bool, args_schema: str | None
) -> TypeAdapter[Any]:
    schema = (
        decision_schema(action_name, allowed, args_schema)
        if per_call
        else response_schema(action_name, allowed, args_schema)
    )
    return TypeAdapter(schema)


def parse_response(
    value: object, request: ApprovalRequest, allowed: tuple[DecisionName, ...], *, per_call: bool = False
) -> Decision:
    """The one decision in a ``HITLResponse`` (``per_call``: the decision itself);
    :class:`ApprovalError` if it is malformed, not allowed, or an edit the tool's schema refuses."""
    allowed_here = decisions_for(request, allowed)
    expected = f"one of {list(allowed_here)}"
    if not per_call:
        expected = f'{{"decisions": [{expected}]}}'
    try:
        adapter = _adapter(request.name, allowed_here, per_call, args_schema_of(request))
        response = adapter.validate_python(value)
    except ValidationError as error:
        refused_edit = [
            e["ctx"]["error"]
            for e in error.errors()
            if isinstance(e.get("ctx", {}).get("error"), RefusedEdit)
        ]
        if refused_edit:
            raise ApprovalError(
                f"invalid answer to the approval request for {request.name}: {refused_edit[0]}"
            ) from error
        raise ApprovalError(
            f"invalid answer to the approval request for {request.name}: expected "
            f"{expected}, got {value!r} ({error.error_count()} error(s))"
        ) from error
    return cast("Decision", response if per_call else response["decisions"][0])


def edit_notice(answer: object) -> str | None:
    """The reviewer notice for an answer (a ``HITLResponse`` or one decision) that edited its call
    (``None`` for any other answer)."""
    decisions = answer.get("decisions", [answer]) if isinstance(answer, Mapping) else None
    decision = decisions[0] if isinstance(decisions, list) and len(decisions) == 1 else None
    if not isinstance(decision, Mapping) or decision.get("type") != "edit":
        return None
    edited = decision.get("edited_action")
    if not isinstance(edited, Mapping):
        return None
    arguments = json.dumps(edited.get("args"), default=str, ensure_ascii=False)
    return EDIT_NOTICE.format(name=edited.get("name"), args=arguments)


def add_notice(notes: list[str], notice: str | None) -> None:
    """Add ``notice`` to ``notes`` once."""
    if notice is not None and notice not in notes:
        notes.append(notice)


async def apply_decision(request: ApprovalRequest, decision: Decision) -> None:
    """Carry out ``decision``; a request no longer pending (expired, abandoned) is left alone."""
    if not request.pending:
        return
    if decision["type"] == "approve":
        await request.accept()
    elif decision["type"] == "edit":
        await request.accept(arguments=dict(decision["edited_action"]["args"]))
    elif decision["type"] == "reject":
        await request.reject(decision.get("message") or DEFAULT_REJECT_REASON)
    else:
        raise ApprovalError(f"unsupported decision {decision['type']!r} for {request.name}")
