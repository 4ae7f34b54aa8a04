"""An execution's result as an Agents SDK tool output: text, plus images as ``ToolOutputImage``."""

from __future__ import annotations

import base64
from typing import Any, Literal, TypeAlias

from agents import ToolOutputImage, ToolOutputText

from ipybox_integrations._session import RenderedResult, with_notes

ImageDetail: TypeAlias = Literal["low", "high", "auto"]


def tool_output(
    rendered: RenderedResult, detail: ImageDetail
) -> str | list[ToolOutputText | ToolOutputImage]:
    """The text alone, or the text followed by each PNG image as a ``data:`` URL."""
    if not rendered.images:
        return rendered.text
    images = [ToolOutputImage(image_url=png_data_url(png), detail=detail) for png in rendered.images]
    return [ToolOutputText(text=rendered.text), *images]


def png_data_url(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def noted_output(notes: list[str], output: Any) -> Any:
    """``output`` (text, or text then images) with ``notes`` in front of its text."""
    if not notes:
        return output
    if isinstance(output, list) and output and isinstance(output[0], ToolOutputText):
        return [ToolOutputText(text=with_notes(notes, output[0].text)), *output[1:]]
    return with_notes(notes, "" if output is None else str(output))
