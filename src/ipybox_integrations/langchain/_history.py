"""Closing the ``execute_code`` calls that new input left without a result (the thread moved on).

An interrupted ``execute_code`` call stays in the thread's history as a tool call without a tool
message. When new input arrives instead of an answer, the waiting execution is cancelled and the
call gets a tool message that says so, right after the message that made it: the model learns the
truth, and providers that require a result for every tool call accept the history.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.messages import AIMessage, AnyMessage, RemoveMessage, ToolMessage
from langgraph.graph.message import REMOVE_ALL_MESSAGES

from ipybox_core import protocol

ABANDONED_RESULT = protocol.UNFINISHED_MESSAGE


def close_abandoned_calls(messages: Sequence[AnyMessage], tool_name: str) -> dict[str, Any] | None:
    """A state update giving every ``tool_name`` call without a result, followed by newer input, a
    tool message with :data:`ABANDONED_RESULT`; ``None`` when there is no such call."""
    answered = {message.tool_call_id for message in messages if isinstance(message, ToolMessage)}
    patched: list[AnyMessage] = []
    changed = False
    index = 0
    while index < len(messages):
        message = messages[index]
        patched.append(message)
        index += 1
        if not isinstance(message, AIMessage):
            continue
        while index < len(messages) and isinstance(messages[index], ToolMessage):
            patched.append(messages[index])  # the results it has: the closing ones go after them
            index += 1
        if index == len(messages):
            break  # the newest message: its calls may still be running
        for call in message.tool_calls:
            if call["name"] == tool_name and call["id"] and call["id"] not in answered:
                patched.append(
                    ToolMessage(ABANDONED_RESULT, tool_call_id=call["id"], name=tool_name, status="error")
                )
                changed = True
    if not changed:
        return None
    return {"messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES), *patched]}
