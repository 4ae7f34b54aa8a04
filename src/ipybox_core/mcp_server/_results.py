"""Tool results of the ipybox MCP server: text plus PNG images, errors flagged, data in ``_meta``."""

from __future__ import annotations

import base64
from typing import TYPE_CHECKING

from mcp_types import CallToolResult, ContentBlock, ImageContent, TextContent

from ipybox_core import protocol

if TYPE_CHECKING:
    from ipybox_core.executor import ExecutionResult


def execution_result(result: ExecutionResult, *, max_chars: int) -> CallToolResult:
    """The output (or traceback) as text and every image as MCP image content.

    Code that raised is a normal result (``isError`` false): the traceback is what the agent
    reads to fix its code. Only ipybox failures (timeouts, a dead kernel) are error results.
    ``_meta`` carries the result as data for ipybox's own client (:mod:`.protocol`).
    """
    from ipybox_core.kernel._text import truncate_middle

    content: list[ContentBlock] = [
        TextContent(type="text", text=truncate_middle(result.to_text(), max_chars))
    ]
    content.extend(
        ImageContent(type="image", data=base64.b64encode(png).decode("ascii"), mime_type="image/png")
        for png in result.images
    )
    data = protocol.result_data(
        text=result.text,
        error=result.error,
        execution_count=result.execution_count,
        omitted_chars=result.omitted_chars,
    )
    return CallToolResult(content=content, _meta={protocol.RESULT: data})


def text_result(text: str, *, error: bool = False) -> CallToolResult:
    """A plain text result; ``error`` marks it as an ipybox failure."""
    return CallToolResult(content=[TextContent(type="text", text=text)], is_error=error)


def failure_result(error: BaseException) -> CallToolResult:
    """An execution that ended without a result: the model's words for its cause
    (:func:`protocol.failure_text`), the error as data (:func:`protocol.encode_error`) in ``_meta``."""
    return CallToolResult(
        content=[TextContent(type="text", text=protocol.failure_text(error))],
        is_error=True,
        _meta={protocol.ERROR: protocol.encode_error(error)},
    )


def error_result(kind: protocol.ErrorKind, message: str) -> CallToolResult:
    """An ipybox failure: ``message`` for the model, ``kind`` in ``_meta`` for ipybox's client."""
    return CallToolResult(
        content=[TextContent(type="text", text=message)],
        is_error=True,
        _meta={protocol.ERROR: protocol.error_data(kind, message)},
    )
