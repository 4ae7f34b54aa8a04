"""What ipybox adds to MCP for its own clients: ``_meta`` entries under ``ipybox.dev/``.

The ipybox service is a plain MCP server (Streamable HTTP, protocol 2026-07-28): any MCP client can
call ``execute_code`` and answer approvals as ``InputRequiredResult`` rounds. ipybox's own client
(:mod:`ipybox_core.remote`) adds a few ``_meta`` entries so that a conversation's parked call can be
found again from another process, and so results and approvals arrive as data, not prose:

Request ``_meta`` of ``tools/call execute_code``:

- ``ipybox.dev/session``: the conversation key (overrides the ``Ipybox-Session`` header);
- ``ipybox.dev/call``: the client's id for this call (e.g. the framework's tool call id);
- ``ipybox.dev/resume``: ``true``: never start code, continue the call parked under ``call``
  (the pending question is returned again); a ``gone`` error when there is none;
- ``ipybox.dev/client``: who answers (recorded as ``client:<name>`` in the audit log);
- ``ipybox.dev/rules``: the client's approval rules for this call (the fields of an
  ``--approval-rules`` file): they can only narrow the service's own rules, never widen them
  (:func:`rules_data`);
- ``ipybox.dev/output``: ``true``: with a ``progressToken``, each progress notification's
  ``message`` is a JSON object ``{"stream": "stdout" | "stderr", "text": ...}`` instead of the
  plain text (every client that sends a ``progressToken`` gets the output as the code prints it);
- ``ipybox.dev/before_call``: ``true``: the client checks each call of the code before the
  service's policy decides it (its ``Execution.before_call``): the service asks in a round whose
  ``InputRequiredResult`` carries ``ipybox.dev/check`` (the call, as approval data), answered with
  ``content`` ``{"allow": true}`` or ``{"refuse": "<reason>"}`` (anything else refuses). A round
  without the flag turns the checks off for the rest of the execution (a ``resume`` round leaves
  them as they were); a check nobody answers in time is refused, never let through;
- ``ipybox.dev/questions``: ``true``: the client answers MCP servers' questions to their user
  (elicitation) during the code's calls: each one is a round whose ``InputRequiredResult`` carries
  the server's own form (or URL) and ``ipybox.dev/question`` (:func:`question_data`), answered
  with the user's ``action`` and ``content`` (a decline or cancel may give ``content``
  ``{"reason": ...}``, told to the code). Without the flag a question is declined at once.

Input response ``content`` (next to ``action``): ``reason`` (a rejection's reason), ``arguments``
(edited arguments of an accepted call) and ``cancel`` (``true``: stop the execution).

Result ``_meta``: ``ipybox.dev/approval`` on an ``InputRequiredResult`` (the request as data),
``ipybox.dev/answered`` on the next round of a call whose approval was answered from the approvals
inbox (the decisions, as data: ``id``, ``approved``, ``decided_by``, ``reason``),
``ipybox.dev/result`` on a finished execution (``ipybox.dev/notice``: the session's kernel was
restarted since its last call), ``ipybox.dev/error`` on a failure; ``ipybox.dev/streamed``: how
many characters of output this round sent as progress notifications (the last notification's
``progress``), so a client knows when it has them all. Output printed in a round's first 0.1 s is
held (a round that ends sooner stays one plain JSON response); for ``ipybox.dev/output`` clients
the output still held when the round ends is ``ipybox.dev/held_output``, a list of
``{"stream", "text"}`` that follows the notified output.

Tool ``cancel_waiting`` cancels the session's executions that wait for an approval when the
conversation moved on (``calls``: only these call ids; ``keep_calls``: never these; ``reason``:
what the pending calls are rejected with); it returns how many it cancelled.

The approvals inbox: tool ``list_approvals`` (``conversation``: only that one) returns, as JSON
``{"approvals": [...]}``, every approval that waits in the service (:func:`waiting_from_data`
reads one); tool ``answer_approval`` (``approval_id``, ``approve``, ``reason``, ``arguments``)
decides one, as ``client:<name>``, and the execution continues in the service: the next round of
its call (a resume, or the asking client's own answer) gets the outcome. A second answer gets a
``decided`` error naming the first decider.

This module is the one home of that wire format: the ``_meta`` keys, the session-name rule
(:data:`SESSION_NAME`, :func:`service_key`), an approval as data both ways (:func:`approval_data`,
:func:`approval_from_data`), an error both ways (:func:`encode_error`, :func:`decode_error`, one
:class:`ErrorKind` per exception class) and the words the model reads for each outcome
(:func:`failure_text` and the ``*_MESSAGE`` texts), the same in process and over the service.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, get_args

from ipybox_core.approval import ApprovalDecision, ApprovalRequest, ApprovalRules
from ipybox_core.approval.request import CallOutcome
from ipybox_core.approval.rules_file import parse_rules
from ipybox_core.errors import (
    ApprovalError,
    CodeError,
    ExecutionCancelled,
    ExecutionGone,
    ExecutionTimeout,
    ExecutorBusy,
    IpyboxError,
    KernelDied,
    ServiceError,
)
from ipybox_core.mcp.elicitation import ElicitationRequest
from ipybox_core.mcp.types import ToolAnnotations

if TYPE_CHECKING:
    from ipybox_core.executor import ToolCall

PREFIX = "ipybox.dev/"
SESSION = PREFIX + "session"
CALL = PREFIX + "call"
RESUME = PREFIX + "resume"
CLIENT = PREFIX + "client"
OUTPUT = PREFIX + "output"
STREAMED = PREFIX + "streamed"
HELD_OUTPUT = PREFIX + "held_output"
APPROVAL = PREFIX + "approval"
RESULT = PREFIX + "result"
ERROR = PREFIX + "error"
NOTICE = PREFIX + "notice"
RULES = PREFIX + "rules"
ANSWERED = PREFIX + "answered"
HOST_TOOLS = PREFIX + "host_tools"
"""The application's agent tools (their definitions) that the code of this execution can call."""
HOST_CALL = PREFIX + "host_call"
"""A round that hands the code's call of an agent tool to the application, to run there."""
BEFORE_CALL = PREFIX + "before_call"
"""``true`` on a round whose client checks each call of the code before the policy decides it."""
CHECK = PREFIX + "check"
"""A round that asks the client's ``before_call`` check about one call of the code (approval data)."""
QUESTIONS = PREFIX + "questions"
"""``true`` on a round whose client answers MCP servers' questions (elicitation) in rounds."""
QUESTION = PREFIX + "question"
"""A round that relays an MCP server's question to the client (:func:`question_data`)."""
TOOL_CALL = "tool_call"
"""The key of a decided call of the code in an ``ipybox.dev/output`` notification (beside the
output's ``stream`` and ``text``)."""
TOOL_CALL_CHARS = 1_000_000
"""The longest result text a relayed tool call keeps (its structured content goes when longer)."""

# --- names --------------------------------------------------------------------------------------

SESSION_NAME = re.compile(r"[A-Za-z0-9._~-]{1,128}")
"""What a session key, a call id or a client name looks like on the wire (``Ipybox-Session``,
``ipybox.dev/session``, ``ipybox.dev/client``)."""
_NOT_IN_NAME = re.compile(r"[^A-Za-z0-9._~-]")


def is_name(value: object) -> bool:
    """True when ``value`` is a string that :data:`SESSION_NAME` accepts."""
    return isinstance(value, str) and SESSION_NAME.fullmatch(value) is not None


def plain_name(text: str) -> str:
    """``text`` made a name: characters :data:`SESSION_NAME` refuses become ``-`` (128 at most)."""
    return _NOT_IN_NAME.sub("-", text)[:128] or "-"


def service_key(key: str) -> str:
    """``key`` as the service accepts it: itself if it is a plain name, otherwise a digest of it."""
    if is_name(key):
        return key
    return "k-" + hashlib.sha256(key.encode()).hexdigest()[:40]


# --- what the model reads -----------------------------------------------------------------------

BUSY_MESSAGE = (
    "Error: another execute_code call is still running or waiting for the user's approval. Wait for "
    "its result before calling execute_code again (do not call it in parallel)."
)
"""Told when execute_code is called while another execution of the same kernel runs or waits."""
GONE_MESSAGE = (
    "Error: the execution waiting for this approval is gone (its approval expired, the conversation "
    "moved on, the session was reset, or the service restarted), so the decision was not applied and "
    "the rest of its code did not run. Check the kernel state and run the code again if it is still "
    "needed."
)
"""Told when the execution a decision was meant for no longer exists and the cause is not known."""
SERVICE_RESTARTED_MESSAGE = (
    "Error: this execute_code call no longer waits for an approval: the ipybox service restarted "
    "while it waited, so the execution is gone and the conversation's kernel is a fresh one "
    "(variables and imports are lost). The decision was not applied and the rest of its code did "
    "not run; run the setup code and then the code again if it is still needed."
)
"""Told when the execution is gone because the service restarted (its kernel restarted with it)."""
NOT_WAITING_MESSAGE = (
    "Error: this execute_code call no longer waits for an approval: it was cancelled (the "
    "conversation moved on, its approval expired, or the session was reset), or the process that "
    "held its kernel (this application, or the ipybox service) restarted, and then the kernel is a "
    "fresh one whose state is lost. The decision was not applied and the rest of its code did not "
    "run; check the kernel state and run the code again if it is still needed."
)
"""Told on a resume that finds no waiting execution for the call, where the cause is not known."""
ANSWERED_ELSEWHERE_MESSAGE = (
    "Note: this approval was already answered from the approvals inbox by {who} ({what}) before this "
    "answer came: that decision was applied, and this answer was not."
)
"""Told (before the result) to a client whose answer came after the inbox's."""
DECIDED_MESSAGE = "Error: this approval was already answered (by {who}); this answer was not applied."
"""Told the loser of two answers to one approval; ``{who}`` is who answered first."""
MOVED_ON_MESSAGE = (
    "Note: the earlier execute_code call was abandoned without a decision; its pending tool call did not "
    "run and the rest of that code was stopped. Kernel state from before that call is kept."
)
"""Told when the conversation moved on while an execute_code call waited for a decision."""
UNFINISHED_MESSAGE = (
    "Error: this execute_code call was abandoned without a result: the conversation went on before "
    "it finished (it waited for an approval that was not given, or the application stopped while it "
    "ran). The rest of its code did not run; check the kernel state before relying on it."
)
"""Told for a call left without a result in the history when new input came."""
CANCELLED_BY_APP = "the application cancelled it"
"""The reason of an execution cancelled without one (``Execution.cancel()``)."""
MOVED_ON = "abandoned: the conversation went on without a decision for this call"
"""Why an execution that waits for a decision is cancelled when its conversation moves on."""
KERNEL_DIED_TEXT = (
    "Error: the kernel died ({error}). Its state is lost; the next execution starts a fresh kernel."
)
ENDED_TEXT = (
    "this execute_code call no longer waits for an approval: {cause}. The decision was not applied "
    "and the rest of its code did not run; check the kernel state and run the code again if it is "
    "still needed"
)
"""Why a call no longer waits (an :class:`ExecutionGone` whose ``cause`` is known): ``{cause}``."""
EXPIRED_TEXT = (
    "this execute_code call no longer waits for an approval: its approval expired ({reason}), so "
    "the call was refused and the code went on without it. This decision was not applied"
)
"""Why a call no longer waits when nobody answered its approval in time and the code went on."""
ANSWERED_TEXT = "this approval was already answered (by {who}); this answer was not applied"
"""Why a call no longer waits when another client (or adapter instance) answered it first."""
DISCONNECTED_TEXT = (
    "this execute_code call was stopped before it finished: while its code ran, the application that "
    "ran it stopped waiting for it (the request was cancelled, or the application stopped, was killed "
    "or lost its connection to the ipybox service). The rest of its code did not run; kernel state "
    "from before the stop is kept, check it before relying on it"
)
"""Why a call has no result when the request that ran its code ended while the code ran (no
approval pending): the ``"disconnected"`` cause of :class:`~ipybox_core.errors.ExecutionGone`."""


def gone_because(error: BaseException) -> ExecutionGone:
    """Why a call whose execution ended as ``error`` no longer waits: an :class:`ExecutionGone` whose
    ``cause`` (``"cancelled"``, ``"timeout"``, ``"kernel_died"``, ``"answered"``, ``"restarted"``)
    and message (the model's words, :func:`failure_text`) name it."""
    if isinstance(error, ExecutionGone):
        return error
    if isinstance(error, ApprovalError):
        return ExecutionGone(ANSWERED_TEXT.format(who=error.decided_by or "someone else"), cause="answered")
    if isinstance(error, ExecutionCancelled):
        cause, why = "cancelled", f"it was cancelled ({str(error) or CANCELLED_BY_APP})"
    elif isinstance(error, ExecutionTimeout):
        cause, why = "timeout", f"it timed out ({error})"
    elif isinstance(error, KernelDied):
        cause, why = "kernel_died", f"its kernel died ({error}); the kernel's state is lost"
    else:
        cause, why = "ended", f"it ended ({type(error).__name__}: {error})"
    return ExecutionGone(ENDED_TEXT.format(cause=why), cause=cause)


def expired(reason: str) -> ExecutionGone:
    """Why a call no longer waits whose approval expired (``reason``) and whose code went on."""
    return ExecutionGone(EXPIRED_TEXT.format(reason=reason), cause="expired")


def failure_text(error: BaseException) -> str:
    """What the model is told when an execution ended without a result: its true cause."""
    if isinstance(error, ExecutionTimeout):
        return f"Error: timed out: {error}."  # it says whether the kernel's state is kept
    if isinstance(error, KernelDied):
        died = str(error)  # a local kernel's message already says that its state is lost
        return (
            f"Error: {died}." if died.startswith("the kernel died") else KERNEL_DIED_TEXT.format(error=died)
        )
    if isinstance(error, ExecutionCancelled):
        reason = str(error) or CANCELLED_BY_APP
        return f"Error: the execution was cancelled: {reason}. The rest of its code did not run."
    if isinstance(error, ExecutorBusy):
        return BUSY_MESSAGE
    if isinstance(error, ExecutionGone):
        if error.cause is None:
            return GONE_MESSAGE
        return SERVICE_RESTARTED_MESSAGE if error.cause == "restarted" else f"Error: {error}."
    if isinstance(error, ApprovalError) and error.decided_by is not None:
        return DECIDED_MESSAGE.format(who=error.decided_by)
    return f"Error: {type(error).__name__}: {error}"


# --- errors both ways ---------------------------------------------------------------------------

ErrorKind = Literal["busy", "gone", "decided", "timeout", "kernel_died", "cancelled", "unavailable"]
"""Why ``execute_code`` gave no result: another execution runs; the parked call is gone (answered,
expired, reset, service restarted); another client decided the approval first; the code timed out;
the kernel died; the execution was cancelled; the kernel could not be started."""
ERROR_KINDS: tuple[ErrorKind, ...] = get_args(ErrorKind)
_CLASSES: dict[ErrorKind, type[IpyboxError]] = {
    "busy": ExecutorBusy,
    "gone": ExecutionGone,
    "decided": ApprovalError,
    "timeout": ExecutionTimeout,
    "kernel_died": KernelDied,
    "cancelled": ExecutionCancelled,
    "unavailable": ServiceError,
}


def error_kind(error: BaseException) -> ErrorKind:
    """The wire kind of ``error`` (most specific class first; anything else is ``unavailable``)."""
    for kind, cls in _CLASSES.items():
        if cls is not ServiceError and isinstance(error, cls):
            return kind
    return "unavailable"


def encode_error(error: BaseException) -> dict[str, Any]:
    """``error`` as JSON data (``ipybox.dev/error``): its kind, its message and its fields."""
    kind = error_kind(error)
    data: dict[str, Any] = {"kind": kind, "message": str(error)}
    if isinstance(error, ExecutionTimeout):
        data["timeout"] = error.timeout
    elif isinstance(error, KernelDied):
        data["exit_code"] = error.exit_code
    elif isinstance(error, ExecutionGone):
        data["cause"] = error.cause
    elif isinstance(error, ApprovalError):
        data["decided_by"] = error.decided_by
    return data


def error_data(kind: ErrorKind, message: str) -> dict[str, str]:
    """Error data of ``kind`` with no fields beyond its message."""
    return {"kind": kind, "message": message}


def decode_error(data: object, text: str = "") -> IpyboxError:
    """The exception that :func:`encode_error` encoded (``text``: the result's text, the message
    when the data has none); data that is not ipybox's decodes to a :class:`ServiceError`."""
    if not isinstance(data, Mapping):
        return ServiceError(text or "the ipybox service failed without saying why")
    kind = data.get("kind")
    message = str(data.get("message") or text)
    if kind == "timeout":
        timeout = data.get("timeout")
        return ExecutionTimeout(message, timeout=float(timeout) if isinstance(timeout, int | float) else 0.0)
    if kind == "kernel_died":
        exit_code = data.get("exit_code")
        return KernelDied(message, exit_code=exit_code if isinstance(exit_code, int) else None)
    if kind == "gone":
        cause = data.get("cause")
        return ExecutionGone(message, cause=cause if isinstance(cause, str) else None)
    if kind == "decided":
        who = data.get("decided_by")
        return ApprovalError(message, decided_by=who if isinstance(who, str) else None)
    cls = _CLASSES[kind] if kind in ERROR_KINDS else ServiceError
    return cls(message)


# --- approvals and results ----------------------------------------------------------------------


def approval_data(request: ApprovalRequest) -> dict[str, Any]:
    """``request`` as JSON data: what a client needs to rebuild it."""
    return {
        "id": request.id,
        "kind": request.kind,
        "server": request.server,
        "tool": request.tool,
        "args": request.args,
        "annotations": {k: v for k, v in dataclasses.asdict(request.annotations).items() if v is not None},
        "input_schema": request.input_schema,
    }


def approval_from_data(data: object) -> ApprovalRequest:
    """The request :func:`approval_data` encoded, with the same ``id`` (decided on this side)."""
    if not isinstance(data, Mapping) or data.get("kind") not in ("mcp", "shell"):
        raise ServiceError(
            "the service asked a question that is not an ipybox approval (is it ipybox serve?)"
        )
    try:
        request = ApprovalRequest(
            kind=data["kind"],
            server=str(data["server"]),
            tool=str(data["tool"]),
            args=dict(data["args"]),
            annotations=ToolAnnotations(**dict(data.get("annotations") or {})),
            input_schema=schema if isinstance(schema := data.get("input_schema"), dict) else None,
        )
        request.id = str(data["id"])
    except (KeyError, TypeError, ValueError) as error:
        raise ServiceError(f"the service sent an approval this client cannot read: {error}") from None
    return request


def check_answer(refusal: str | None) -> dict[str, Any]:
    """The ``content`` of a client's answer to an ``ipybox.dev/check`` round."""
    return {"allow": True} if refusal is None else {"refuse": refusal}


def check_refusal(content: object) -> str | None:
    """The refusal in the ``content`` of an answer to an ``ipybox.dev/check`` round (``None``: the
    call may go on); anything but ``{"allow": true}`` or ``{"refuse": "<reason>"}`` refuses."""
    if isinstance(content, Mapping):
        refuse = content.get("refuse")
        if isinstance(refuse, str) and refuse:
            return refuse
        if content.get("allow") is True and refuse is None:
            return None
    return "the application's answer to the before-call check was neither allow nor refuse"


def question_data(question: ElicitationRequest) -> dict[str, Any]:
    """An MCP server's question (an :class:`~ipybox_core.mcp.elicitation.ElicitationRequest`) as
    JSON data: ``server``, ``tool``, ``message``, ``schema`` and ``url``."""
    return {
        "server": question.server,
        "tool": question.tool,
        "message": question.message,
        "schema": dict(question.schema),
        "url": question.url,
    }


def question_from_data(data: object) -> ElicitationRequest:
    """The question :func:`question_data` wrote.

    Raises:
        ServiceError: ``data`` is not a question.
    """
    if not isinstance(data, Mapping) or not isinstance(data.get("server"), str):
        raise ServiceError(f"the service sent a question that is not one: {data!r}")
    tool, url, schema = data.get("tool"), data.get("url"), data.get("schema")
    return ElicitationRequest(
        server=data["server"],
        tool=tool if isinstance(tool, str) else None,
        message=str(data.get("message") or ""),
        schema=schema if isinstance(schema, Mapping) else {},
        url=url if isinstance(url, str) else None,
    )


def tool_call_data(call: ToolCall, *, max_chars: int = TOOL_CALL_CHARS) -> dict[str, Any]:
    """A decided call of the code (a :class:`~ipybox_core.executor.ToolCall`) as JSON data; a
    result longer than ``max_chars`` keeps the head of its text and drops its structured content."""
    decision, outcome = call.decision, call.outcome
    structured, text = outcome.structured, outcome.text
    if len(text) > max_chars or len(json.dumps(structured, default=str)) > max_chars:
        structured, text = None, text[:max_chars] + f"\n... ({len(text) - max_chars} more characters)"
    return {
        "request": approval_data(call.request),
        "decision": {
            "approved": decision.approved,
            "decided_by": decision.decided_by,
            "reason": decision.reason,
            "arguments": decision.arguments,
        },
        "outcome": {"ok": outcome.ok, "structured": structured, "text": text, "error": outcome.error},
    }


def tool_call_parts(data: object) -> tuple[dict[str, Any], ApprovalDecision, CallOutcome]:
    """The request data, decision and outcome :func:`tool_call_data` encoded.

    Raises:
        ServiceError: ``data`` is not a tool call.
    """
    try:
        assert isinstance(data, Mapping)
        decision, outcome = dict(data["decision"]), dict(data["outcome"])
        arguments = decision.get("arguments")
        return (
            dict(data["request"]),
            ApprovalDecision(
                approved=decision["approved"] is True,
                decided_by=str(decision["decided_by"]),
                reason=decision.get("reason") if isinstance(decision.get("reason"), str) else None,
                arguments=dict(arguments) if isinstance(arguments, Mapping) else None,
            ),
            CallOutcome(
                ok=outcome["ok"] is True,
                structured=outcome.get("structured"),
                text=str(outcome.get("text") or ""),
                error=outcome.get("error") if isinstance(outcome.get("error"), str) else None,
            ),
        )
    except (AssertionError, KeyError, TypeError, ValueError) as error:
        raise ServiceError(f"the service sent a tool call this client cannot read: {error!r}") from None


def result_data(
    *, text: str, error: CodeError | None, execution_count: int | None, omitted_chars: int
) -> dict[str, Any]:
    """A finished execution as JSON data (its images travel as MCP image content)."""
    return {
        "text": text,
        "error": None
        if error is None
        else {"ename": error.ename, "evalue": error.evalue, "traceback": error.traceback},
        "execution_count": execution_count,
        "omitted_chars": omitted_chars,
    }


def png_of(data: str) -> bytes:
    return base64.b64decode(data)


def meta_value(meta: Mapping[str, Any] | None, key: str) -> Any:
    """``meta[key]`` if ``meta`` has it (``_meta`` objects are pydantic models or dicts)."""
    if meta is None:
        return None
    if isinstance(meta, Mapping):
        return meta.get(key)
    extra = getattr(meta, "model_extra", None) or {}
    return extra.get(key, getattr(meta, key, None))


# --- the approvals inbox and client rules -------------------------------------------------------


@dataclass(frozen=True)
class WaitingApproval:
    """One approval that waits in the service (an entry of the approvals inbox)."""

    id: str
    """The approval's id (the ``ApprovalRequest.id`` its conversation sees): answer it by this."""
    conversation: str
    """The conversation (session) key it waits in, as the client named it (a key that is not a
    plain name travels as its digest, :func:`service_key`; ``"default"``: clients that name none)."""
    call_id: str | None
    """The ``execute_code`` call it belongs to (the framework's tool call id), if the client named one."""
    kind: str
    """``"mcp"`` or ``"shell"``."""
    server: str
    tool: str
    arguments: dict[str, Any]
    read_only: bool
    """The tool says it only reads (``readOnlyHint``: a hint from the server)."""
    hints: tuple[str, ...]
    """The hints worth showing an approver: ``"read-only"``, ``"destructive"``."""
    asked_at: float
    """When the code asked (seconds since the epoch, the service's clock)."""
    asked_by: str | None
    """The client name of the process whose call asked (``ipybox.dev/client``), if it gave one."""
    waiting_for: float
    """Seconds it had waited when the list was made."""

    @property
    def name(self) -> str:
        """``server.tool`` (``shell`` for a shell command)."""
        return f"{self.server}.{self.tool}" if self.kind == "mcp" else "shell"


def waiting_data(approval: WaitingApproval) -> dict[str, Any]:
    """``approval`` as JSON data (an entry of ``list_approvals``)."""
    data = dataclasses.asdict(approval)
    data["hints"] = list(approval.hints)
    return data


def waiting_from_data(data: object) -> WaitingApproval:
    """The :class:`WaitingApproval` that :func:`waiting_data` encoded."""
    if not isinstance(data, Mapping):
        raise ServiceError("the service listed an approval this client cannot read")
    try:
        return WaitingApproval(
            id=str(data["id"]),
            conversation=str(data["conversation"]),
            call_id=None if data.get("call_id") is None else str(data["call_id"]),
            kind=str(data["kind"]),
            server=str(data["server"]),
            tool=str(data["tool"]),
            arguments=dict(data["arguments"]),
            read_only=bool(data.get("read_only")),
            hints=tuple(str(hint) for hint in data.get("hints") or ()),
            asked_at=float(data["asked_at"]),
            asked_by=None if data.get("asked_by") is None else str(data["asked_by"]),
            waiting_for=float(data["waiting_for"]),
        )
    except (KeyError, TypeError, ValueError) as error:
        raise ServiceError(f"the service listed an approval this client cannot read: {error}") from None


def rules_data(rules: ApprovalRules) -> dict[str, Any]:
    """``rules`` as JSON data (``ipybox.dev/rules``: the fields of an approval rules file)."""
    return {
        "allow": list(rules.allow),
        "deny": list(rules.deny),
        "allow_read_only": rules.allow_read_only,
        "default": rules.default,
    }


def rules_from_data(data: object) -> ApprovalRules:
    """The :class:`ApprovalRules` of ``ipybox.dev/rules``.

    Raises:
        ConfigError: the data is not valid rules (every problem named, as for a rules file).
    """
    return parse_rules(data, Path("<the client's ipybox.dev/rules>"))
