"""Converting iopub messages of an execution into typed events."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ipybox_core.kernel._kernel_bootstrap import TRUNCATION_MIME
from ipybox_core.kernel._stream_limit import StreamLimiter
from ipybox_core.kernel._text import truncate_middle
from ipybox_core.kernel._traceback import clean_traceback
from ipybox_core.kernel.events import (
    ClearOutput,
    DisplayData,
    ExecutionError,
    KernelEvent,
    OutputTruncated,
    StreamName,
)

_DISPLAY_TYPES = ("display_data", "update_display_data", "execute_result")


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
) -> DisplayData | ClearOutput | OutputTruncated | None:
    """The event for a rich-output message, or None for messages that are not output.

    The kernel's output cap reports dropped stream text as a display message of its own type.
    """
    if msg_type in _DISPLAY_TYPES:
        marker = (content.get("data") or {}).get(TRUNCATION_MIME)
        if isinstance(marker, dict):
            return OutputTruncated(int(marker.get("omitted_chars", 0)))
        data = {
            mime: truncate_middle(value, text_limit)
            if isinstance(value, str) and mime.startswith("text/")
            else value
            for mime, value in (content.get("data") or {}).items()
        }
        transient = content.get("transient") or {}
        display_id = transient.get("display_id")
        return DisplayData(
            data=data,
            metadata=content.get("metadata") or {},
            is_result=msg_type == "execute_result",
            display_id=str(display_id) if display_id is not None else None,
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
    """The events for one iopub message of the running execution (shared by every kernel backend)."""
    if msg_type == "stream":
        chunk = limiter.feed(stream_name(content), str(content.get("text", "")))
        return [chunk] if chunk is not None else []
    if msg_type == "error":
        # After a timeout the KeyboardInterrupt is ours: it is reported as ExecutionTimeout.
        return [] if timed_out else [error_event(content, hidden_prefixes)]
    display = display_event(msg_type, content, text_limit)
    if isinstance(display, OutputTruncated):
        return limiter.upstream_truncation(display.omitted_chars)
    return [display] if display is not None else []
