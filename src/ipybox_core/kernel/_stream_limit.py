"""Bounds what one execution yields: stream text (a live head, a held-back tail, a count in between)
and rich display data (one budget for all displays; what does not fit is dropped and reported)."""

from __future__ import annotations

from collections import deque
from itertools import groupby
from operator import itemgetter

from ipybox_core.inkernel._bootstrap import display_budget, fit_display
from ipybox_core.kernel.events import (
    DisplayData,
    DisplayOmitted,
    KernelEvent,
    OutputTruncated,
    StreamName,
    StreamText,
)

_ZMQ_FRAME_SLACK = 1 << 16


def max_iopub_frame_bytes(output_limit: int) -> int:
    """The largest kernel message (all its frames) an honest kernel sends with this output limit.

    Its displays and stream writes are capped inside the kernel; JSON takes at most 6 bytes per
    character. A larger message is reported as omitted, never parsed.
    """
    return 6 * (display_budget(output_limit) + max(0, output_limit)) + _ZMQ_FRAME_SLACK


PARSED_PER_MESSAGE_BYTE = 4
"""How many times the largest honest message's size one message may take while it is parsed."""


def max_parsed_message_bytes(max_message_bytes: int) -> int:
    """The most memory parsing one kernel message may take (its bound is computed before parsing,
    see :mod:`._json_cost`): with the default limits ~24 times the display budget, where honest
    displays in the costliest shapes they come in (JSON data of a chart, a base64 image) fit.
    """
    return PARSED_PER_MESSAGE_BYTE * max_message_bytes


class DisplayBudget:
    """One execution's allowance for display data, spent in the order displays arrive.

    A display that does not fit keeps its smallest MIME parts that do (the same rule the kernel
    applies to itself) and is followed by a :class:`DisplayOmitted` event.
    """

    def __init__(self, size: int) -> None:
        self.left = size

    def admit(self, display: DisplayData) -> list[KernelEvent]:
        """``display`` (or what of it fits), then a :class:`DisplayOmitted` if anything was cut."""
        kept, metadata, used, dropped, dropped_size = fit_display(
            dict(display.data), display.metadata, self.left
        )
        self.left -= used
        if not dropped and not dropped_size:
            return [display]
        omitted = DisplayOmitted(
            displays=0 if kept else 1,
            trimmed=1 if kept else 0,
            size=dropped_size,
            mime_types=tuple(dropped),
        )
        if not kept:
            return [omitted]
        trimmed = DisplayData(
            data=kept,
            metadata=metadata,
            is_result=display.is_result,
            display_id=display.display_id,
            is_update=display.is_update,
        )
        return [trimmed, omitted]


class StreamLimiter:
    """Passes the first ``limit`` characters through, then keeps only the last ``limit // 2``.

    :meth:`feed` returns what may be yielded right away; :meth:`finish` returns the end of the
    output (an :class:`OutputTruncated` event and the kept tail) once the execution is over.
    :attr:`displays` bounds the execution's display data (``output_limit`` + a constant).
    """

    def __init__(self, limit: int) -> None:
        self.displays = DisplayBudget(display_budget(limit))
        self._live_left = limit
        self._tail_limit = limit // 2
        self._tail: deque[tuple[StreamName, str]] = deque()
        self._tail_len = 0
        self._omitted = 0

    def feed(self, name: StreamName, text: str) -> StreamText | None:
        if self._live_left >= len(text):
            self._live_left -= len(text)
            return StreamText(name, text) if text else None
        live, rest = text[: self._live_left], text[self._live_left :]
        self._live_left = 0
        self._hold(name, rest)
        return StreamText(name, live) if live else None

    def upstream_truncation(self, omitted_chars: int) -> list[KernelEvent]:
        """The kernel itself dropped ``omitted_chars``: what was held back so far, then the marker."""
        return [*self.finish(), OutputTruncated(omitted_chars)]

    def finish(self) -> list[KernelEvent]:
        events: list[KernelEvent] = []
        if self._omitted:
            events.append(OutputTruncated(self._omitted))
        for name, chunks in groupby(self._tail, key=itemgetter(0)):
            events.append(StreamText(name, "".join(text for _, text in chunks)))
        self._tail.clear()
        self._tail_len = 0
        self._omitted = 0
        return events

    def _hold(self, name: StreamName, text: str) -> None:
        if len(text) > self._tail_limit:
            self._omitted += self._tail_len + len(text) - self._tail_limit
            self._tail.clear()
            self._tail_len = 0
            text = text[len(text) - self._tail_limit :] if self._tail_limit else ""
        if not text:
            return
        self._tail.append((name, text))
        self._tail_len += len(text)
        overflow = self._tail_len - self._tail_limit
        while overflow > 0:
            first_name, first = self._tail[0]
            cut = min(overflow, len(first))
            if cut == len(first):
                self._tail.popleft()
            else:
                self._tail[0] = (first_name, first[cut:])
            self._tail_len -= cut
            self._omitted += cut
            overflow -= cut
