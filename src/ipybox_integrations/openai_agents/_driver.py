"""Runs code in the executor, one nested "model turn" per stop: an MCP call to approve, or the end.

The hidden kernel agent's :class:`KernelModel` asks :meth:`KernelDriver.step` what it "generates".
A fresh ``execute_code`` invocation starts the code in its conversation's executor under the outer
``execute_code`` call id; each held MCP call becomes a function call of the matching proxy tool
(call id ``ipybox-<approval id>``) while the execution waits in its executor. ``CodeActionTool``
finds it there again by the outer call id (``executor.reattach``) before the nested run resumes,
from this or any other tool instance (over an ipybox service: any process). When the SDK resumes
with the proxy's output, the driver rejects the request if the proxy did not run (the user rejected
it; the output is the rejection message) and continues the execution to its next stop, so a
decision only ever answers the approval it was taken for. The finished execution becomes the nested
run's final message. When the executor does not list its tools in advance (an ipybox service's),
the proxies are learned from the requests: the first request of a tool is shown again
(``ipybox-<approval id>-again``) once the SDK has reported its proxy missing
(:data:`PROXY_MISSING`), in the next nested turn.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeAlias

from agents import TResponseInputItem
from agents.items import TResponseOutputItem
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

from ipybox_core import protocol
from ipybox_core.approval import ApprovalRequest
from ipybox_core.approval.request import USER
from ipybox_core.errors import ApprovalError, IpyboxError
from ipybox_core.executor import Execution, ExecutionEvent, ExecutionResult
from ipybox_integrations._agent_tools import NO_APPROVAL
from ipybox_integrations._session import BUSY_MESSAGE, describe_failure, render_result, start_execution
from ipybox_integrations.openai_agents._invocation import (
    SHOWN_AGAIN,
    Invocation,
    current_invocation,
    nested_call_id,
)
from ipybox_integrations.openai_agents._proxies import ProxyTools, request_identity

logger = logging.getLogger(__name__)

EventHook: TypeAlias = Callable[[ExecutionEvent], "Awaitable[None] | None"]
"""Receives every event of an execution as it happens (output, displays, approval requests, result)."""

STALE_APPROVAL_MESSAGE = protocol.NOT_WAITING_MESSAGE
UNREACHABLE_MESSAGE = (
    "Error: the execution that waited for this approval could not be resumed: the ipybox service "
    "did not answer ({error}). The decision was not applied and the rest of its code did not run "
    "here; it may still wait in the service."
)
PROXY_MISSING = "ipybox: this MCP call is shown for approval in the next step"
"""The nested tool output the SDK reports (``tool_not_found``) for a proxy not yet in its tool list."""
NOT_SHOWN_REASON = "ipybox could not show this call for approval"
DEFAULT_REJECT_REASON = "the user rejected the call"
UNKNOWN_TOOL_REASON = (
    "this MCP server was registered after execute_code started; call execute_code again to use it"
)
NOT_INVOKED_MESSAGE = "Error: the kernel agent runs only inside CodeActionTool's execute_code."


class KernelDriver:
    """Turns executions into nested model outputs; see the module docstring."""

    def __init__(
        self,
        proxies: ProxyTools,
        *,
        ask: bool,
        timeout: float | None,
        on_event: EventHook | None,
        on_tools_changed: Callable[[], None],
    ) -> None:
        self._proxies = proxies
        self._ask = ask
        self._timeout = timeout
        self._on_event = on_event
        self._on_tools_changed = on_tools_changed

    async def step(self, model_input: str | list[TResponseInputItem]) -> list[TResponseOutputItem]:
        """The nested model's next output for ``model_input`` (the nested run's history)."""
        items = [_as_dict(item) for item in model_input] if isinstance(model_input, list) else []
        last = items[-1] if items else {"role": "user", "content": model_input}
        invocation = current_invocation()
        if invocation is None:
            return [_message(NOT_INVOKED_MESSAGE)]
        if last.get("type") == "function_call_output":
            return await self._resume(str(last.get("call_id")), _text_of(last.get("output")), invocation)
        return await self._start(_code_of(last.get("content")), invocation)

    async def _start(self, code: str, invocation: Invocation) -> list[TResponseOutputItem]:
        if invocation.execution is not None:  # it waits in its executor: ask its question again
            return [self._again(invocation)]
        execution = start_execution(invocation.executor, code, self._timeout, call_id=invocation.call_id)
        if execution is None:
            return [_message(BUSY_MESSAGE)]
        invocation.execution = execution
        return await self._advance(execution, invocation)

    async def _resume(self, call_id: str, output: str, invocation: Invocation) -> list[TResponseOutputItem]:
        request = invocation.request(call_id)
        if output == PROXY_MISSING:
            if request is not None and request.pending and not call_id.endswith(SHOWN_AGAIN):
                # its proxy exists now (learned); a new call id: the SDK settled the first one
                return [_function_call(call_id + SHOWN_AGAIN, request)]
            output = NOT_SHOWN_REASON
        if request is None or invocation.execution is None:  # the decision was for another approval
            return [self._again(invocation)]
        if request.pending:  # the proxy did not run: the user rejected the call
            with contextlib.suppress(ApprovalError):
                await request.reject(output or DEFAULT_REJECT_REASON)
        return await self._advance(invocation.execution, invocation)

    def _again(self, invocation: Invocation) -> TResponseOutputItem:
        """What the execution found in its executor stands at: its question, its result, or gone."""
        if invocation.waiting and invocation.shown is not None:
            return _function_call(nested_call_id(invocation.shown), invocation.shown)
        if invocation.rendered is not None:  # it finished while waiting (its approval expired)
            return _message(invocation.rendered.text)
        return _message(_lost_message(invocation))

    async def _advance(self, execution: Execution, invocation: Invocation) -> list[TResponseOutputItem]:
        try:
            async for event in execution:
                await self._notify(event)
                if isinstance(event, ApprovalRequest):
                    own = self._proxies.host_approval(event)  # an agent tool's own needs_approval
                    ask = self._ask if own is None else own is not False
                    if ask and invocation.learns_tools and self._proxies.learn(event):
                        self._on_tools_changed()
                    if not ask:  # the audit log names why nobody was asked
                        with contextlib.suppress(ApprovalError):  # it may have expired already
                            await event.accept(decided_by=USER if own is None else NO_APPROVAL)
                    elif not self._proxies.knows(event):
                        with contextlib.suppress(ApprovalError):
                            await event.reject(UNKNOWN_TOOL_REASON)
                    else:
                        invocation.shown = event  # it waits in its executor under the outer call id
                        return [_function_call(nested_call_id(event), event)]
                elif isinstance(event, ExecutionResult):
                    invocation.rendered = render_result(event)
                    return [_message(invocation.rendered.text)]
        except IpyboxError as error:  # ExecutionTimeout, KernelDied, ExecutionCancelled
            return [_message(describe_failure(error))]
        return [_message("Error: the execution ended without a result.")]

    async def _notify(self, event: ExecutionEvent) -> None:
        if self._on_event is None:
            return
        try:
            outcome = self._on_event(event)
            if inspect.isawaitable(outcome):
                await outcome
        except Exception:  # a broken UI hook must not break the execution
            logger.exception("on_event hook failed for %r", event)


def _lost_message(invocation: Invocation) -> str:
    if invocation.service_error is not None:
        return UNREACHABLE_MESSAGE.format(error=invocation.service_error)
    return invocation.ended or STALE_APPROVAL_MESSAGE


def _function_call(call_id: str, request: ApprovalRequest) -> ResponseFunctionToolCall:
    name, namespace = request_identity(request)
    return ResponseFunctionToolCall(
        type="function_call",
        id=call_id,
        call_id=call_id,
        name=name,
        namespace=namespace,
        arguments=json.dumps(request.args, ensure_ascii=False, default=str),
        status="completed",
    )


def _message(text: str) -> ResponseOutputMessage:
    return ResponseOutputMessage(
        id="ipybox-kernel-output",
        type="message",
        role="assistant",
        status="completed",
        content=[ResponseOutputText(type="output_text", text=text, annotations=[])],
    )


def _as_dict(item: Any) -> dict[str, Any]:
    if isinstance(item, dict):
        return item
    dumped: dict[str, Any] = item.model_dump(exclude_unset=True)
    return dumped


def _text_of(value: Any) -> str:
    """Text of a message content or tool output: a string or a list of text parts."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "".join(str(part.get("text", "")) for part in value if isinstance(part, dict))
    return "" if value is None else str(value)


def _code_of(content: Any) -> str:
    """The code of a fresh invocation: the nested run's input is ``{"code": ...}`` as JSON."""
    text = _text_of(content)
    try:
        arguments = json.loads(text)
    except json.JSONDecodeError:
        return text
    return str(arguments.get("code", "")) if isinstance(arguments, dict) else text
