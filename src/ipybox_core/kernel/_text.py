"""Text helpers: ANSI stripping and a bounded head-and-tail buffer."""

from __future__ import annotations

import re
from collections import deque

_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")


def strip_ansi(text: str) -> str:
    """Remove ANSI escape sequences (colours, cursor movement, OSC titles)."""
    if "\x1b" not in text:
        return text
    return _ANSI.sub("", text)


def omitted_marker(count: int) -> str:
    """The line that stands for ``count`` dropped characters."""
    return f"\n[... {count:,} characters omitted ...]\n"


def truncate_middle(text: str, limit: int) -> str:
    """``text`` if it fits in ``limit`` characters, else its head and tail around a marker."""
    if len(text) <= limit:
        return text
    buffer = HeadTailText(limit)
    buffer.append(text)
    return buffer.render()


class HeadTailText:
    """Keeps the first and the last characters of a long text in bounded memory.

    Up to ``limit // 2`` characters at the head, the rest of the budget at the tail, and a count of
    what was dropped in between. Appending is linear in the appended text.
    """

    def __init__(self, limit: int) -> None:
        if limit < 0:
            raise ValueError(f"limit must be >= 0, got {limit}")
        self.head_limit = limit // 2
        self.tail_limit = limit - self.head_limit
        self.clear()

    def clear(self) -> None:
        """Forget everything appended so far."""
        self._head: list[str] = []
        self._head_len = 0
        self._tail: deque[str] = deque()
        self._tail_len = 0
        self.omitted = 0
        self.total = 0
        self._last = ""

    @property
    def ends_with_newline(self) -> bool:
        """Whether the text so far is empty or ends with a newline."""
        return self._last in ("", "\n")

    def append(self, text: str) -> None:
        if not text:
            return
        self.total += len(text)
        self._last = text[-1]
        room = self.head_limit - self._head_len
        if room > 0:
            self._head.append(text[:room])
            self._head_len += min(room, len(text))
            text = text[room:]
            if not text:
                return
        if len(text) >= self.tail_limit:
            dropped = self._tail_len + len(text) - self.tail_limit
            self._tail.clear()
            self._tail_len = 0
            text = text[len(text) - self.tail_limit :] if self.tail_limit else ""
            self.omitted += dropped
        else:
            overflow = self._tail_len + len(text) - self.tail_limit
            while overflow > 0:
                first = self._tail[0]
                if len(first) <= overflow:
                    self._tail.popleft()
                    self._tail_len -= len(first)
                    self.omitted += len(first)
                    overflow -= len(first)
                else:
                    self._tail[0] = first[overflow:]
                    self._tail_len -= overflow
                    self.omitted += overflow
                    overflow = 0
        if text:
            self._tail.append(text)
            self._tail_len += len(text)

    def skip(self, count: int) -> None:
        """Record ``count`` characters that were dropped before they reached this buffer."""
        self.omitted += count
        self.total += count

    def render(self) -> str:
        head = "".join(self._head)
        tail = "".join(self._tail)
        if not self.omitted:
            return head + tail
        return head + omitted_marker(self.omitted) + tail
