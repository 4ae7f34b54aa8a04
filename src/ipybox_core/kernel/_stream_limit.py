"""Bounds the stream text one execution yields: a live head, a held-back tail, a count in between."""

from __future__ import annotations

from collections import deque
from itertools import groupby
from operator import itemgetter

from ipybox_core.kernel.events import KernelEvent, OutputTruncated, StreamName, StreamText


class StreamLimiter:
    """Passes the first ``limit`` characters through, then keeps only the last ``limit // 2``.

    :meth:`feed` returns what may be yielded right away; :meth:`finish` returns the end of the
    output (an :class:`OutputTruncated` event and the kept tail) once the execution is over.
    """

    def __init__(self, limit: int) -> None:
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
