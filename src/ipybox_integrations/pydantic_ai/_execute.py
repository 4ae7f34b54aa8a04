"""What ``execute_code`` does: run code, put every held call through PydanticAI's approvals, suspend.

One ``execute_code`` call runs one :class:`~ipybox_core.executor.Execution` in the kernel of its
conversation, started under the ``execute_code`` call id. Each approval request of the code is
dispatched as a nested tool call (see :mod:`._nested`): a handler capability decides it inline, any
number of times per execution. When nothing decides it, the tool raises ``ApprovalRequired``: the
run ends with ``DeferredToolRequests`` while the execution waits in its executor, and the next run's
``DeferredToolResults`` finds it there by call id (``executor.reattach``, from any ``CodeAction``
instance: an app may build its agent per request) and resumes it, once per held call. PydanticAI's
own answers (``True``, ``ToolApproved(override_args=...)``, ``ToolDenied(message)``) decide the MCP
call that waits (:meth:`CodeRunner.before_node` turns them into the held call's decision); one bound
to another call's ``approval_id`` is ignored. A new prompt on a history whose call still waits, or a
run that no longer carries it (a new history), closes and cancels it at once.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from pydantic_ai import (
    ApprovalRequired,
    BinaryContent,
    CallDeferred,
    CallToolsNode,
    ModelRetry,
    RunContext,
    ToolApproved,
    ToolCallPart,
    ToolDenied,
    ToolReturn,
    UserPromptNode,
)
from pydantic_ai.exceptions import ToolFailed, ToolRetryError
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelRequestPart,
    ModelResponse,
    ToolReturnPart,
)

from ipybox_core import protocol
from ipybox_core.approval import ApprovalRequest
from ipybox_core.errors import ExecutionGone, ServiceError, ToolError
from ipybox_core.executor import Execution, ExecutionResult, OutputChunk, ToolCall
from ipybox_core.hosttools import HOST_SERVER
from ipybox_core.mcp.elicitation import ElicitationRequest
from ipybox_core.protocol import MOVED_ON
from ipybox_integrations._agent_tools import NO_APPROVAL
from ipybox_integrations._failures import EXECUTION_FAILURES, error_text
from ipybox_integrations._notes import Notes
from ipybox_integrations._session import (
    ABANDONED_MESSAGE,
    BUSY_MESSAGE,
    DEFAULT_SESSION_KEY,
    Conversations,
    Executor,
    approval_description,
    describe_failure,
    render_result,
    start_execution,
    with_notes,
)
from ipybox_integrations._waiting import WaitingCalls, ended_text, found_again, not_waiting
from ipybox_integrations.pydantic_ai._agent_tools import UNAVAILABLE_MESSAGE as _UNAVAILABLE
from ipybox_integrations.pydantic_ai._agent_tools import (
    AgentTools,
    denied_message,
    dispatch_agent_tool_call,
)
from ipybox_integrations.pydantic_ai._deferred_events import emit
from ipybox_integrations.pydantic_ai._nested import dispatch_held_call
from ipybox_integrations.pydantic_ai._questions import (
    ANSWER,
    MAX_REFUSED,
    ask_inline,
    found_asking,
    give,
    question_call,
    question_metadata,
)
from ipybox_integrations.pydantic_ai._usage import CodeCalls, not_a_tool_call
from ipybox_integrations.pydantic_ai.approvals import (
    DEFAULT_REJECT_REASON,
    deferred_answer,
    pending_approval,
    request_metadata,
)
from ipybox_integrations.pydantic_ai.events import ApprovalDecided, ApprovalRequested, CodeOutput

logger = logging.getLogger(__name__)

STALE_APPROVAL_MESSAGE = protocol.NOT_WAITING_MESSAGE
DENIED_REASON = "the user denied this execute_code call"
FAILED_RUN_REASON = "the agent run that asked for this approval failed"
NOT_ASKED = (
    "PydanticAI's CodeAction does not put MCP servers' questions to the user "
    "(CodeAction(elicitation=True) does, or the application answers them with CodeExecutor(mcp_elicit=...))"
)
"""Why an MCP server's question during a call of the code is declined (told to the code on its stderr)."""

ConversationKey = Callable[[RunContext[Any]], "str | None"]
"""Maps a run to its conversation (and so its kernel), e.g. ``lambda ctx: ctx.deps.user_id``."""


def default_conversation_key(ctx: RunContext[Any]) -> str | None:
    """PydanticAI's own conversation id (``Agent.run(conversation_id=...)``, else the history's)."""
    return ctx.conversation_id


@dataclass(frozen=True)
class CallRef:
    """Which conversation and ``execute_code`` call an execution belongs to."""

    conversation: str
    call_id: str
    run_id: str | None
    calls: CodeCalls
    """The code's tool calls, counted and limited in this run."""


UNANSWERED_QUESTION_NOTE = (
    "an answer was ignored: this request is an MCP server's question, answered in "
    "DeferredToolResults.calls (the form's values)"
)
IGNORED_ANSWER_NOTE = (
    "an answer was ignored: it was given for another held call (its approval_id is not this request's)"
)
_REJECTING_ERRORS = (ToolFailed, ModelRetry, ToolRetryError)
_REMEMBERED_DENIALS = 10_000


class CodeRunner:
    """Runs ``execute_code`` calls in each conversation's kernel and keeps executions parked for approval."""

    def __init__(
        self,
        conversations: Conversations,
        *,
        tool_name: str = "execute_code",
        key: ConversationKey | None,
        timeout: float | None,
        abandon_after: float | None,
        agent_tools: AgentTools | None = None,
        elicitation: bool = False,
    ) -> None:
        self.conversations = conversations
        self.elicitation = elicitation
        """An MCP server's question is a deferred question (else it is declined, :data:`NOT_ASKED`)."""
        self.agent_tools = agent_tools
        """The agent's own tools the code calls (``from agent_tools import ...``), if any."""
        self.tool_name = tool_name
        self.key = key or default_conversation_key
        self.timeout = timeout
        self.waiting = WaitingCalls(conversations.source, abandon_after=abandon_after)
        """The calls this instance left waiting for a deferred approval (their executions wait in
        their executors, where any instance finds them); ``abandon_after`` is this capability's
        own backstop (``None``: the executor's or the service's applies)."""
        self._notes = Notes[str]()
        self._denied: dict[tuple[str, str], None] = {}  # denied calls already cancelled

    def conversation_of(self, ctx: RunContext[Any]) -> str:
        return self.key(ctx) or DEFAULT_SESSION_KEY

    def pending_notes(self, ctx: RunContext[Any]) -> list[str]:
        """Notes the model has not seen yet in this conversation (an abandoned call)."""
        return self._notes.peek(self.conversation_of(ctx))

    # --- the tool ---------------------------------------------------------------------------

    async def execute_code(self, ctx: RunContext[Any], code: str) -> ToolReturn | str:
        result = await self._execute_code(ctx, code)
        not_a_tool_call(ctx)
        return result

    async def _execute_code(self, ctx: RunContext[Any], code: str) -> ToolReturn | str:
        conversation = self.conversation_of(ctx)
        call_id = ctx.tool_call_id or "execute_code"
        session = await self.conversations.session(conversation)
        executor = session.executor
        notes = self._notes.take(conversation, session)
        parked = self.waiting.resumed(conversation, call_id)
        request: ApprovalRequest | ElicitationRequest | None = None
        # A deferred answer (or a history replayed without one) for a call that waits in its
        # executor, left there by this or any other instance; a busy executor may hold it too.
        found = None
        if ctx.tool_call_approved or parked or executor.busy:
            found = await _reattached(executor, call_id, questions=self.elicitation)
        if isinstance(found, str):  # it ended while it waited: why
            return with_notes(notes, found)
        if found is not None:
            execution, stop = found
            if isinstance(stop, ExecutionResult):  # it finished meanwhile (its approval expired)
                return _noted(notes, tool_return(stop))
            request = stop
        elif ctx.tool_call_approved:
            return with_notes(notes, await not_waiting(executor, call_id))
        else:
            started = start_execution(executor, code, self.timeout, call_id=call_id)
            if started is None:
                return with_notes(notes, BUSY_MESSAGE)
            execution = started
        ref = CallRef(
            conversation, call_id, ctx.run_id, CodeCalls(ctx, lambda call: self._is_own_tool(ctx, call))
        )
        execution.before_call = ref.calls.before_call
        if self.agent_tools is not None:  # the agent tools this execution's code calls run in this run
            self.agent_tools.bind(executor, ctx)
        try:
            if isinstance(request, ElicitationRequest):
                await self._answer_question(ctx, ref, execution, request)
            elif request is not None and request.pending:
                await self._answer_deferred(ctx, ref, executor, execution, request)
            return _noted(notes, await self._drive(ctx, ref, executor, execution))
        except (ApprovalRequired, CallDeferred):
            self._notes.put_back(conversation, notes)
            raise
        except BaseException:
            if not execution.done:
                await asyncio.shield(execution.cancel("execute_code failed"))
            raise

    async def _drive(
        self, ctx: RunContext[Any], ref: CallRef, executor: Executor, execution: Execution
    ) -> ToolReturn | str:
        try:
            async for event in execution:
                if isinstance(event, OutputChunk):
                    await emit(ctx, CodeOutput(text=event.text, stream=event.stream))
                elif isinstance(event, ApprovalRequest):
                    await self._decide(ctx, ref, executor, execution, event)
                elif isinstance(event, ToolCall):
                    ref.calls.finished(event)
                elif isinstance(event, ElicitationRequest):
                    if self.elicitation:
                        await self._ask(ctx, ref, execution, event)
                    else:
                        event.decline_unanswered(NOT_ASKED)
                elif isinstance(event, ExecutionResult):
                    return tool_return(event)
        except EXECUTION_FAILURES as error:
            return describe_failure(error)
        raise RuntimeError("the execution ended without a result")

    # --- approvals --------------------------------------------------------------------------

    async def _decide(
        self,
        ctx: RunContext[Any],
        ref: CallRef,
        executor: Executor,
        execution: Execution,
        request: ApprovalRequest,
    ) -> None:
        """Decide ``request`` inline through the run's handlers, or park the execution and defer."""
        with ref.calls.deciding(request):  # let on by before_call, unless it began in another run
            call, metadata = held_call(ref.call_id, request)
            if self._is_agent_tool(request):
                await self._call_agent_tool(ctx, ref, execution, request, call, metadata)
                return
            await emit(ctx, ApprovalRequested(approval=pending_approval(call.tool_call_id, metadata)))
            try:
                denied_reason = await self._ask_handlers(ctx, executor, request, call, metadata)
            except ApprovalRequired:
                self._park(ref, execution, request)
                raise ApprovalRequired(metadata=metadata) from None
            await self._finish(ctx, request, denied_reason)

    async def _answer_deferred(
        self,
        ctx: RunContext[Any],
        ref: CallRef,
        executor: Executor,
        execution: Execution,
        request: ApprovalRequest,
    ) -> None:
        """Apply the ``DeferredToolResults`` answer to the parked ``request``, or ask again."""
        call, metadata = held_call(ref.call_id, request)
        answer = ctx.tool_call_metadata if ctx.tool_call_approved else None
        # A PydanticAI answer (translated by answer_natively) decides the call the history waits
        # on; one approval_results built is bound to its held call by the approval_id.
        valid = (
            isinstance(answer, dict)
            and ANSWER not in answer  # an answer to a question, not to this held call
            and answer.get("approval_id", request.id) == request.id
        )
        decision = answer.get("decision", "approve") if isinstance(answer, dict) else None
        if not valid or decision not in ("approve", "reject"):
            if ctx.tool_call_approved:
                logger.warning("ipybox: %s (execute_code call %s)", IGNORED_ANSWER_NOTE, ref.call_id)
                metadata = {**metadata, "note": IGNORED_ANSWER_NOTE}
            self._park(ref, execution, request)
            raise ApprovalRequired(metadata=metadata)
        assert isinstance(answer, dict)
        if decision == "reject":
            await self._finish(ctx, request, str(answer.get("reason") or DEFAULT_REJECT_REASON))
            return
        arguments = answer.get("arguments")
        if isinstance(arguments, dict):
            call = ToolCallPart(call.tool_name, dict(arguments), tool_call_id=call.tool_call_id)
        with ref.calls.deciding(request):
            if self._is_agent_tool(request):
                await self._call_agent_tool(ctx, ref, execution, request, call, metadata, approved=True)
                return
            denied_reason = await self._ask_handlers(ctx, executor, request, call, metadata, approved=True)
            await self._finish(ctx, request, denied_reason)

    async def _ask_handlers(
        self,
        ctx: RunContext[Any],
        executor: Executor,
        request: ApprovalRequest,
        call: ToolCallPart,
        metadata: dict[str, Any],
        *,
        approved: bool = False,
    ) -> str | None:
        """Put the held call through the run's handlers: why it was denied (``None``: let through).
        Raises ``ApprovalRequired`` when none decided it."""
        description = executor.tool_description(request.server, request.tool) or approval_description(request)
        try:
            denied = await dispatch_held_call(
                ctx,
                request,
                call,
                metadata,
                description=description,
                approved=approved,
                outcome=not self.elicitation,  # the result may wait on a question of the execution
            )
        except _REJECTING_ERRORS as error:
            return error_text(error)
        return denied_message(denied)

    async def _finish(
        self, ctx: RunContext[Any], request: ApprovalRequest, denied_reason: str | None
    ) -> None:
        """Reject ``request`` if it was denied, and tell the event stream how it was decided."""
        if denied_reason is not None and request.pending:
            await request.reject(denied_reason)
        decision = request.decision
        approved = decision is not None and decision.approved
        reason = None if approved or decision is None else decision.reason
        await emit(
            ctx, ApprovalDecided(approval_id=request.id, name=request.name, approved=approved, reason=reason)
        )

    # --- an MCP server's questions ---------------------------------------------------------

    async def _ask(
        self, ctx: RunContext[Any], ref: CallRef, execution: Execution, question: ElicitationRequest
    ) -> None:
        """Put ``question`` to the run's handlers until one answers it, or park the execution and
        defer it (``CallDeferred(kind="question")``); an answer the form refuses asks again."""
        error: str | None = None
        for _ in range(MAX_REFUSED):
            metadata = question_metadata(question, ref.call_id, error)
            call = question_call(f"{ref.call_id}__q{uuid.uuid4().hex[:12]}", metadata)
            try:
                answer = await ask_inline(ctx, call, metadata)
            except CallDeferred:
                self._park(ref, execution, question)
                raise CallDeferred(metadata=metadata, kind="question") from None
            except _REJECTING_ERRORS as failed:  # the handler failed the question: the server is told no
                question.decline_unanswered(error_text(failed))
                return
            error = await give(question, answer)
            if error is None:
                return
        question.decline_unanswered(f"the answer was refused {MAX_REFUSED} times, last: {error}")

    async def _answer_question(
        self, ctx: RunContext[Any], ref: CallRef, execution: Execution, question: ElicitationRequest
    ) -> None:
        """Give the ``DeferredToolResults`` answer to the parked ``question``, or ask again."""
        metadata = ctx.tool_call_metadata if ctx.tool_call_approved else None
        error: str | None = None
        if isinstance(metadata, dict) and ANSWER in metadata:
            error = await give(question, metadata[ANSWER])
            if error is None:
                return
        asked = question_metadata(question, ref.call_id, error)
        if ctx.tool_call_approved and error is None:  # an approval's answer, for a question
            logger.warning("ipybox: %s (execute_code call %s)", UNANSWERED_QUESTION_NOTE, ref.call_id)
            asked["note"] = UNANSWERED_QUESTION_NOTE
        self._park(ref, execution, question)
        raise CallDeferred(metadata=asked, kind="question")

    # --- the agent's own tools -------------------------------------------------------------

    def _is_agent_tool(self, request: ApprovalRequest) -> bool:
        return self.agent_tools is not None and request.kind == "mcp" and request.server == HOST_SERVER

    def _is_own_tool(self, ctx: RunContext[Any], call: ToolCall) -> bool:
        """One of the agent's own tools (it runs in a ``ToolManager`` of the run, which counts it)."""
        tools = self.agent_tools
        return (
            self._is_agent_tool(call.request) and tools is not None and tools.tool(ctx, call.tool) is not None
        )

    async def _call_agent_tool(
        self,
        ctx: RunContext[Any],
        ref: CallRef,
        execution: Execution,
        request: ApprovalRequest,
        call: ToolCallPart,
        metadata: dict[str, Any],
        *,
        approved: bool = False,
    ) -> None:
        """Decide and run a held call of one of the agent's tools the PydanticAI way: asked (inline,
        or deferred: the execution parks) only when the tool requires approval; the call's outcome
        is kept for the tool server, which lets it through to the code."""
        assert self.agent_tools is not None
        results = self.agent_tools.results
        tool = self.agent_tools.tool(ctx, request.tool)
        if tool is None:
            results.put(request.tool, request.args, ToolError(_UNAVAILABLE.format(name=request.tool)))
            await request.accept(decided_by=NO_APPROVAL)
            return
        asked: list[bool] = [approved]

        async def on_ask() -> None:
            asked[0] = True
            await emit(ctx, ApprovalRequested(approval=pending_approval(call.tool_call_id, metadata)))

        denied_reason: str | None
        try:
            result = await dispatch_agent_tool_call(
                ctx, tool, call, request, metadata, approved=approved, results=results, on_ask=on_ask
            )
        except ApprovalRequired as held:  # with the tool's own metadata, if it raised some
            self._park(ref, execution, request)
            raise ApprovalRequired(metadata=held.metadata or metadata) from None
        except Exception as error:  # the tool's error (delivered), or a handler's or hook's
            denied_reason = None if not request.pending else error_text(error)
            if denied_reason is not None and not asked[0]:  # before the tool ran: an error for the code
                results.put(request.tool, request.args, ToolError(denied_reason))
                await request.accept(decided_by=NO_APPROVAL)
                return
        else:
            denied_reason = denied_message(result)
        if asked[0]:
            await self._finish(ctx, request, denied_reason)

    # --- parking ----------------------------------------------------------------------------

    def _park(
        self, ref: CallRef, execution: Execution, request: ApprovalRequest | ElicitationRequest
    ) -> None:
        """Leave ``execution`` waiting in its executor for the deferred answer."""
        self.waiting.left(ref.conversation, ref.call_id, run=ref.run_id)

    async def cancel(
        self, reason: str | None, *, conversation: str | None = None, run_id: str | None = None
    ) -> int:
        """Cancel the waiting calls this instance parked (those of the run ``run_id`` if given);
        returns how many.

        With ``conversation``: everything that waits in that conversation, parked by any instance.
        """
        if conversation is not None:
            return await self.waiting.cancel_conversation(conversation, reason=reason)
        return await self.waiting.cancel(reason, run=run_id)

    async def before_node(self, ctx: RunContext[Any], node: Any) -> Any:
        """Map PydanticAI's own answers onto held calls; close calls a new prompt moves on from."""
        if isinstance(node, CallToolsNode) and node.tool_call_results:
            return self._answer_natively(node)
        if (
            isinstance(node, UserPromptNode)
            and node.user_prompt is not None
            and node.deferred_tool_results is None
        ):
            await self._close_moved_on(ctx)
        return node

    def _answer_natively(self, node: CallToolsNode[Any, Any]) -> CallToolsNode[Any, Any]:
        """Turn ``True`` / ``ToolApproved(override_args)`` / ``ToolDenied(message)`` for a waiting
        ``execute_code`` call into the decision of the MCP call it holds (see ``deferred_answer``).

        PydanticAI would not call a denied tool, so a denial becomes an approval of ``execute_code``
        carrying "reject": the held call raises ``PermissionError(message)`` and the code goes on.
        An abort (:meth:`Decision.abort`) stays a denial of the whole ``execute_code`` call.
        """
        results = dict(node.tool_call_results or {})
        metadata = dict(node.tool_call_metadata or {})
        for call in node.model_response.tool_calls:
            result = results.get(call.tool_call_id)
            answer = metadata.get(call.tool_call_id)
            if call.tool_name == self.tool_name and isinstance(result, ToolReturn):
                # An answer in DeferredToolResults.calls: the question's (see _answer_question).
                results[call.tool_call_id] = ToolApproved()
                metadata[call.tool_call_id] = {**(answer or {}), ANSWER: result.return_value}
                continue
            if call.tool_name != self.tool_name or not isinstance(result, (ToolApproved, ToolDenied)):
                continue
            if isinstance(result, ToolDenied) and (answer or {}).get("decision") == "abort":
                continue
            results[call.tool_call_id] = ToolApproved()
            metadata[call.tool_call_id] = deferred_answer(result, answer)
        return dataclasses.replace(node, tool_call_results=results, tool_call_metadata=metadata)

    async def _close_moved_on(self, ctx: RunContext[Any]) -> None:
        """A new prompt on a history whose ``execute_code`` calls still wait: answer them for the
        model ("moved on") and cancel their executions, so the run needs no ``repair_messages()``."""
        calls = [call for call in open_tool_calls(ctx.messages) if call.tool_name == self.tool_name]
        if not calls:
            return
        ctx.messages.append(
            ModelRequest(
                parts=[
                    ToolReturnPart(call.tool_name, ABANDONED_MESSAGE, tool_call_id=call.tool_call_id)
                    for call in calls
                ]
            )
        )
        conversation = self.conversation_of(ctx)
        ids = [call.tool_call_id for call in calls]
        await self.waiting.cancel_conversation(conversation, calls=ids, reason=MOVED_ON)

    async def cancel_denied(self, ctx: RunContext[Any], parts: Iterable[ModelRequestPart]) -> None:
        """Interrupt waiting executions whose ``execute_code`` call was answered with ``ToolDenied``
        (parked by any instance; over an ipybox service by any process)."""
        conversation = self.conversation_of(ctx)
        denied = []
        for part in parts:
            if not isinstance(part, ToolReturnPart) or part.outcome != "denied":
                continue
            key = (conversation, part.tool_call_id)
            if key not in self._denied:
                denied.append(part.tool_call_id)
                self._denied[key] = None
        while len(self._denied) > _REMEMBERED_DENIALS:
            del self._denied[next(iter(self._denied))]
        if denied:
            await self.waiting.cancel_conversation(conversation, calls=denied, reason=DENIED_REASON)

    async def cancel_abandoned(self, ctx: RunContext[Any]) -> int:
        """At the start of a run: cancel this conversation's waiting calls its history no longer carries.

        A call is still carried while it is an unanswered tool call of the history's last response
        (the run may bring its decision); ``repair_messages()``, a new history or none closes it.
        """
        conversation = self.conversation_of(ctx)
        open_calls = {call.tool_call_id for call in open_tool_calls(ctx.messages)}
        cancelled = await self.waiting.cancel_conversation(conversation, keep=open_calls, reason=MOVED_ON)
        if cancelled:
            self._notes.add(conversation, ABANDONED_MESSAGE)
        return cancelled

    async def cancel_run(self, ctx: RunContext[Any]) -> int:
        """After a failed run: cancel what it parked (no one can answer a run that raised)."""
        if ctx.run_id is None:
            return 0
        return await self.cancel(FAILED_RUN_REASON, run_id=ctx.run_id)


def open_tool_calls(messages: list[ModelMessage]) -> list[ToolCallPart]:
    """The tool calls of the history's last response that have no result yet."""
    for last in range(len(messages) - 1, -1, -1):
        response = messages[last]
        if isinstance(response, ModelResponse):
            answered = {
                part.tool_call_id
                for message in messages[last + 1 :]
                for part in message.parts
                if isinstance(part, ToolReturnPart)
            }
            return [call for call in response.tool_calls if call.tool_call_id not in answered]
    return []


def _noted(notes: list[str], result: ToolReturn | str) -> ToolReturn | str:
    if not notes:
        return result
    if isinstance(result, str):
        return with_notes(notes, result)
    value = result.return_value
    if isinstance(value, str):
        value = with_notes(notes, value)
    elif isinstance(value, list) and value and isinstance(value[0], str):
        value = [with_notes(notes, value[0]), *value[1:]]
    return dataclasses.replace(result, return_value=value)


def held_call(execute_code_call_id: str, request: ApprovalRequest) -> tuple[ToolCallPart, dict[str, Any]]:
    """The nested tool call standing for ``request`` (named after the MCP tool, with its arguments)
    and the metadata of its approval request."""
    call = ToolCallPart(
        request.tool, dict(request.args), tool_call_id=f"{execute_code_call_id}__{request.id[:12]}"
    )
    metadata = request_metadata(
        request, execute_code_call_id=execute_code_call_id, tool_call_id=call.tool_call_id
    )
    return call, metadata


def tool_return(result: ExecutionResult) -> ToolReturn:
    """The model-facing return of an execution: output or traceback text, then PNG images."""
    rendered = render_result(result)
    images = [BinaryContent(png, media_type="image/png") for png in rendered.images]
    value: str | list[Any] = [rendered.text, *images] if images else rendered.text
    metadata = {
        "execution_count": result.execution_count,
        "error": result.error.ename if result.error is not None else None,
        "images": len(images),
    }
    return ToolReturn(return_value=value, metadata=metadata)


async def _reattached(
    executor: Executor, call_id: str, *, questions: bool = False
) -> tuple[Execution, ApprovalRequest | ElicitationRequest | ExecutionResult] | str | None:
    """The execution of ``call_id`` and where it stands, when this or another instance (over a
    service: process) left it waiting; the model's words for its cause when it ended meanwhile."""
    try:
        return await (found_asking(executor, call_id) if questions else found_again(executor, call_id))
    except (ExecutionGone, *EXECUTION_FAILURES) as error:
        return ended_text(error)
    except ServiceError as error:
        logger.warning("ipybox: could not resume execute_code call %s in the service: %s", call_id, error)
        return None
