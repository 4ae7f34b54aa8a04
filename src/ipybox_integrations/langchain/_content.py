"""What the model gets back from ``execute_code``: text and image content blocks, or an error."""

from __future__ import annotations

import base64
from collections.abc import Awaitable
from typing import Any, overload

from langchain_core.messages.content import create_image_block, create_text_block
from langchain_core.tools import ToolException

from ipybox_core.executor import ExecutionResult
from ipybox_integrations._session import render_result, with_notes

ContentBlocks = list[dict[str, Any]]


class ExecuteCodeError(ToolException):
    """``execute_code`` did not succeed; the model sees ``content`` in an error ``ToolMessage``.

    Raised for code that raised (the content is the output and traceback, plus any images), a busy
    kernel, a timeout, a dead kernel, or a suspended execution that no longer exists.
    """

    def __init__(self, content: str | ContentBlocks) -> None:
        super().__init__(content if isinstance(content, str) else _text_of(content))
        self.content = content


def result_content(result: ExecutionResult) -> ContentBlocks:
    """Content blocks for a finished execution; raises :class:`ExecuteCodeError` if the code raised."""
    rendered = render_result(result)
    blocks: ContentBlocks = [dict(create_text_block(rendered.text))]
    blocks += [
        dict(create_image_block(base64=base64.b64encode(png).decode("ascii"), mime_type="image/png"))
        for png in rendered.images
    ]
    if rendered.failed:
        raise ExecuteCodeError(blocks)
    return blocks


def error_content(error: ToolException) -> str | ContentBlocks:
    """``handle_tool_error`` for ``execute_code``: the error's content blocks, or its message."""
    if isinstance(error, ExecuteCodeError):
        return error.content
    return str(error)


async def noted(notes: list[str], content: Awaitable[ContentBlocks]) -> ContentBlocks:
    """The awaited content, or the content of its :class:`ExecuteCodeError`, preceded by ``notes``."""
    try:
        blocks = await content
    except ExecuteCodeError as error:
        if not notes:
            raise
        raise ExecuteCodeError(_prefixed(notes, error.content)) from error
    return _prefixed(notes, blocks)


@overload
def _prefixed(notes: list[str], content: str) -> str: ...
@overload
def _prefixed(notes: list[str], content: ContentBlocks) -> ContentBlocks: ...
def _prefixed(notes: list[str], content: str | ContentBlocks) -> str | ContentBlocks:
    if not notes:
        return content
    if isinstance(content, str):
        return with_notes(notes, content)
    if content and content[0].get("type") == "text":
        return [{**content[0], "text": with_notes(notes, str(content[0]["text"]))}, *content[1:]]
    return [dict(create_text_block("\n\n".join(notes))), *content]


def _text_of(blocks: ContentBlocks) -> str:
    return "\n".join(str(block["text"]) for block in blocks if block.get("type") == "text")
