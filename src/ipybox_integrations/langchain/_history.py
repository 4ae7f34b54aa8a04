"""Closing the ``execute_code`` calls that new input left without a result (the thread moved on).

An interrupted ``execute_code`` call stays in the thread's history as a tool call without a tool
message. When new input arrives instead of an answer, the waiting execution is cancelled and the
call gets a tool message that says so, right after the message that made it: the model learns the
truth, and providers that require a result for every tool call accept the history. A call whose code
ran to its end meanwhile (answered from the ipybox service's approvals inbox) gets its real result.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal, TypeAlias

from langchain_core.messages import AIMessage, AnyMessage, RemoveMessage, ToolMessage
from langgraph.graph.message import REMOVE_ALL_MESSAGES

from ipybox_core import protocol
from ipybox_core.errors import IpyboxError
from ipybox_core.executor import ExecutionResult
from ipybox_integrations._session import DEFAULT_SESSION_KEY, SessionSource
from ipybox_integrations.langchain._content import ContentBlocks, ExecuteCodeError, result_content

ABANDONED_RESULT = protocol.UNFINISHED_MESSAGE
Closing: TypeAlias = "tuple[str | ContentBlocks, Literal['success', 'error']]"
"""The content and status of the tool message that closes an abandoned call."""


def abandoned_calls(messages: Sequence[AnyMessage], tool_name: str) -> list[str]:
    """The ids of the ``tool_name`` calls without a result that newer input follows."""
    return [call_id for _, call_id in _abandoned(messages, tool_name)]


async def finished_results(source: SessionSource, key: str, call_ids: Sequence[str]) -> dict[str, Closing]:
    """The results of abandoned calls whose code ran to its end meanwhile (e.g. the approvals inbox
    answered it in the ipybox service), or why one ended without a result when its executor knows
    (e.g. the process that ran it was killed while its code ran): they close their calls instead of
    :data:`ABANDONED_RESULT`. What still waits is left to be cancelled."""
    if not call_ids:
        return {}
    executor = (await source.session(key or DEFAULT_SESSION_KEY)).executor
    found: dict[str, Closing] = {}
    for call_id in call_ids:
        try:
            execution = await executor.reattach(call_id)
            if execution is None:
                gone = await executor.ended(call_id)
                if gone is not None:
                    found[call_id] = (protocol.failure_text(gone), "error")
                continue
            if (execution.pending_approvals or execution.pending_questions) and not execution.done:
                continue
            stop = await execution.next_stop()
        except IpyboxError:
            continue  # it ended without a result (cancelled, timed out, gone): the call did not finish
        if isinstance(stop, ExecutionResult):
            try:
                found[call_id] = (result_content(stop), "success")
            except ExecuteCodeError as error:  # the code raised: its traceback is the result
                found[call_id] = (error.content, "error")
    return found


def close_abandoned_calls(
    messages: Sequence[AnyMessage], tool_name: str, results: Mapping[str, Closing] | None = None
) -> dict[str, Any] | None:
    """A state update giving every ``tool_name`` call without a result, followed by newer input, a
    tool message: its result from ``results`` if it has one, else :data:`ABANDONED_RESULT`;
    ``None`` when there is no such call."""
    closing = {index: call_id for index, call_id in _abandoned(messages, tool_name)}
    if not closing:
        return None
    patched: list[AnyMessage] = []
    for index, message in enumerate(messages):
        patched.append(message)
        for after, call_id in closing.items():
            if after == index:
                content, status = (results or {}).get(call_id, (ABANDONED_RESULT, "error"))
                body: str | list[str | dict[Any, Any]] = content if isinstance(content, str) else [*content]
                patched.append(ToolMessage(body, tool_call_id=call_id, name=tool_name, status=status))
    return {"messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES), *patched]}


def _abandoned(messages: Sequence[AnyMessage], tool_name: str) -> list[tuple[int, str]]:
    """(index of the message its closing result goes after, call id) of each abandoned call: the
    result goes after the tool messages that follow the call's AI message."""
    answered = {message.tool_call_id for message in messages if isinstance(message, ToolMessage)}
    found: list[tuple[int, str]] = []
    index = 0
    while index < len(messages):
        message = messages[index]
        index += 1
        if not isinstance(message, AIMessage):
            continue
        while index < len(messages) and isinstance(messages[index], ToolMessage):
            index += 1  # the results it has: the closing ones go after them
        if index == len(messages):
            break  # the newest message: its calls may still be running
        found += [
            (index - 1, call["id"])
            for call in message.tool_calls
            if call["name"] == tool_name and call["id"] and call["id"] not in answered
        ]
    return found
