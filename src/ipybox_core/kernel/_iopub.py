"""Converting iopub messages of an execution into typed events."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ipybox_core.inkernel._bootstrap import DISPLAY_OMITTED_MIME, TRUNCATION_MIME
from ipybox_core.kernel._stream_limit import StreamLimiter
from ipybox_core.kernel._text import truncate_middle
from ipybox_core.kernel._traceback import clean_traceback
from ipybox_core.kernel.events import (
    ClearOutput,
    DisplayData,
    DisplayOmitted,
    ExecutionError,
    KernelEvent,
    OutputTruncated,
    StreamName,
)

_DISPLAY_TYPES = ("display_data", "update_display_data", "execute_result")
# What a kernel's own markers may claim (they are only reported, never trusted for more).
_MAX_COUNT = 10**15
_MAX_MIME_TYPES = 16
_MAX_NAME = 100


def omitted_message(header: Any, parent_header: Any, size: int, channel: str = "iopub") -> dict[str, Any]:
    """A kernel message too large to parse, as the report of an omitted display (its content is
    never parsed): the execution it belongs to (by ``parent_header``) says so in its output."""
    report = {"displays": 1, "trimmed": 0, "size": size, "mime_types": []}
    return {
        "header": _dict(header),
        "msg_type": "display_data",
        "parent_header": _dict(parent_header),
        "content": {"data": {DISPLAY_OMITTED_MIME: report}, "metadata": {}},
        "channel": channel,
    }


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _count(value: Any) -> int:
    return min(value, _MAX_COUNT) if isinstance(value, int) and value > 0 else 0


def _omission(marker: dict[str, Any]) -> DisplayOmitted:
    """The kernel's report of display data it dropped itself."""
    names = marker.get("mime_types")
    names = names[:_MAX_MIME_TYPES] if isinstance(names, list) else []
    return DisplayOmitted(
        displays=_count(marker.get("displays")),
        trimmed=_count(marker.get("trimmed")),
        size=_count(marker.get("size")),
        mime_types=tuple(name[:_MAX_NAME] for name in names if isinstance(name, str)),
    )


def stream_name(content: dict[str, Any]) -> StreamName:
    return "stderr" if content.get("name") == "stderr" else "stdout"


def error_event(content: dict[str, Any], hidden_prefixes: Sequence[str]) -> ExecutionError:
    entries = content.get("traceback") or []
    return ExecutionError(
        ename=str(content.get("ename", "Error")),
        evalue=str(content.get("evalue", "")),
        traceback=clean_traceback([str(e) for e in entries], hidden_prefixes),
    )


def display_event(
    msg_type: str, content: dict[str, Any], text_limit: int
) -> DisplayData | DisplayOmitted | ClearOutput | OutputTruncated | None:
    """The event for a rich-output message, or None for messages that are not output.

    The kernel's output caps report dropped stream text and dropped displays as display messages
    of their own types. Whatever the message holds, this does not raise.
    """
    if msg_type in _DISPLAY_TYPES:
        raw = _dict(content.get("data"))
        marker = raw.get(TRUNCATION_MIME)
        if isinstance(marker, dict):
            return OutputTruncated(_count(marker.get("omitted_chars")))
        marker = raw.get(DISPLAY_OMITTED_MIME)
        if isinstance(marker, dict):
            return _omission(marker)
        data = {
            mime: truncate_middle(value, text_limit)
            if isinstance(value, str) and mime.startswith("text/")
            else value
            for mime, value in raw.items()
        }
        display_id = _dict(content.get("transient")).get("display_id")
        return DisplayData(
            data=data,
            metadata=_dict(content.get("metadata")),
            is_result=msg_type == "execute_result",
            display_id=str(display_id)[:_MAX_NAME] if isinstance(display_id, (str, int)) else None,
            is_update=msg_type == "update_display_data",
        )
    if msg_type == "clear_output":
        return ClearOutput(wait=bool(content.get("wait")))
    return None


def output_events(
    msg_type: str,
    content: dict[str, Any],
    limiter: StreamLimiter,
    *,
    timed_out: bool,
    hidden_prefixes: Sequence[str],
    text_limit: int,
) -> list[KernelEvent]:
    """The events for one iopub message of the running execution (shared by every kernel backend).

    Display data beyond the execution's budget (``limiter.displays``) is dropped here, before any
    consumer sees it, and reported as :class:`DisplayOmitted`.
    """
    if not isinstance(content, dict):
        return []
    if msg_type == "stream":
        chunk = limiter.feed(stream_name(content), str(content.get("text", "")))
        return [chunk] if chunk is not None else []
    if msg_type == "error":
        # After a timeout the KeyboardInterrupt is ours: it is reported as ExecutionTimeout.
        if timed_out:
            return []
        error = error_event(content, hidden_prefixes)
        return [
            ExecutionError(
                ename=error.ename[:_MAX_NAME],
                evalue=truncate_middle(error.evalue, text_limit),
                traceback=truncate_middle(error.traceback, text_limit),
            )
        ]
    display = display_event(msg_type, content, text_limit)
    if isinstance(display, OutputTruncated):
        return limiter.upstream_truncation(display.omitted_chars)
    if isinstance(display, DisplayData):
        return limiter.displays.admit(display)
    return [display] if display is not None else []
