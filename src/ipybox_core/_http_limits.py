"""What a connection to an ipybox HTTP listener may cost before it has sent a request.

Every listener (the ``ipybox mcp``/``ipybox serve`` endpoint, each kernel's tool server, the
sandbox's ``allow_hosts`` proxy) takes its :class:`ListenerLimits`:

- a **header timeout**: a connection that has not completed its request headers within
  ``header_timeout`` seconds of opening (or of its last response) is closed; bytes that trickle in
  without completing them do not extend it;
- a **cap on connections**: one beyond ``max_connections`` is answered ``503`` and closed at once;
- a **cap on waiting connections** (optional): connections without a request being handled
  (headers not complete yet, or idle between requests) are the only kind a client without a token
  can hold, so when ``max_waiting`` of them are open a new connection closes the oldest. They can
  therefore never fill the listener and lock out clients that send complete, authenticated
  requests.

:func:`bounded_h11` turns the limits into uvicorn's HTTP/1.1 protocol; :class:`RepeatFilter` keeps
the same log line from being written more than once a minute (one line, then a count).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import resource
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, ClassVar, cast

from uvicorn.protocols.http.h11_impl import H11Protocol


@dataclass(frozen=True)
class ListenerLimits:
    """The connection limits of one listener (see the module docstring)."""

    max_connections: int
    """Connections held open at once; one more is answered ``503`` and closed."""
    header_timeout: float
    """Seconds a connection may go without a request being handled: from its opening, or from the
    end of its last response, until its next request's headers are complete."""
    max_waiting: int | None = None
    """Connections without a request being handled; a new connection beyond this many closes the
    oldest of them. ``None``: no separate cap (only ``max_connections``)."""

    def __post_init__(self) -> None:
        if self.max_connections < 1 or self.header_timeout <= 0:
            raise ValueError("max_connections and header_timeout must be positive")
        if self.max_waiting is not None and not 1 <= self.max_waiting <= self.max_connections:
            raise ValueError("max_waiting must be between 1 and max_connections")

    @property
    def backlog(self) -> int:
        """The listen backlog: asyncio accepts up to this many connections per wake-up, so keeping
        it near the caps bounds the descriptors a burst holds before the caps apply."""
        return max(8, min(self.max_waiting or self.max_connections, 128))


def descriptor_budget_limits(header_timeout: float, *, soft_limit: int | None = None) -> ListenerLimits:
    """Limits for a service listener from the process's open-file limit (``RLIMIT_NOFILE``).

    Connections may hold a quarter of the descriptors (at most 1024), waiting ones a quarter of
    that: the rest stays for kernels, MCP servers and the accept backlog. At the common limit of
    1024 that is 256 connections, 64 of them waiting.
    """
    if soft_limit is None:
        soft_limit = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        if soft_limit == resource.RLIM_INFINITY:
            soft_limit = 4096
    connections = max(8, min(1024, soft_limit // 4))
    return ListenerLimits(connections, header_timeout, max_waiting=max(4, connections // 4))


def plain_refusal(text: str) -> bytes:
    """A complete ``503`` response with a text body, for connections beyond the cap."""
    body = text.encode() + b"\n"
    head = (
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain; charset=utf-8\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    )
    return head.encode() + body


class BoundedH11(H11Protocol):
    """uvicorn's HTTP/1.1 protocol under a listener's :class:`ListenerLimits`.

    Use :func:`bounded_h11` for a class with a listener's limits (each listener keeps its own
    count of waiting connections).
    """

    limits: ClassVar[ListenerLimits]
    refusal: ClassVar[bytes]
    log_name: ClassVar[str | None]
    waiting: ClassVar[dict[BoundedH11, None]]
    """This listener's waiting connections, oldest first."""

    _refused = False
    _done = False
    _timer: asyncio.TimerHandle | None = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.log_name is not None:
            # not uvicorn's loggers: they belong to the application (which may run uvicorn itself)
            self.logger = logging.getLogger(self.log_name)
            self.access_logger = logging.getLogger(f"{self.log_name}.access")
            self.access_log = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        max_waiting = self.limits.max_waiting
        if max_waiting is not None:
            if len(self.waiting) >= max_waiting:
                self._evict_oldest()
            if len(self.connections) >= self.limits.max_connections and self.waiting:
                self._evict_oldest()
        if len(self.connections) >= self.limits.max_connections:
            self._refused = True
            self.transport = cast(asyncio.Transport, transport)
            self.transport.write(self.refusal)
            self.transport.close()
            return
        super().connection_made(transport)  # type: ignore[arg-type]
        self._sync()

    def data_received(self, data: bytes) -> None:
        if not (self._refused or self._done):
            super().data_received(data)

    def handle_events(self) -> None:
        super().handle_events()
        self._sync()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._sync()

    def connection_lost(self, exc: Exception | None) -> None:
        self._forget()
        if not self._refused:
            super().connection_lost(exc)

    def _sync(self) -> None:
        """Track whether a request is being handled (a waiting connection has a deadline)."""
        if self._done or self.transport.is_closing():
            self._forget()
            return
        if self.cycle is not None and not self.cycle.response_complete:
            self._forget()
        elif self not in self.waiting:
            self.waiting[self] = None
            self._timer = self.loop.call_later(self.limits.header_timeout, self._expired)

    def _forget(self) -> None:
        self.waiting.pop(self, None)
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _expired(self) -> None:
        self._timer = None
        if self.cycle is not None and not self.cycle.response_complete:
            return  # a request is being handled
        self._close()

    def _evict_oldest(self) -> None:
        oldest = next(iter(self.waiting))
        oldest._close()
        self.logger.warning(
            "too many connections without a complete request (at most %d wait at once): closing the oldest",
            self.limits.max_waiting,
        )

    def _close(self) -> None:
        """Close a waiting connection now; it no longer counts (its descriptor goes next tick)."""
        self._forget()
        self._done = True
        self.connections.discard(self)
        self.transport.close()


def bounded_h11(limits: ListenerLimits, *, refusal: bytes, log_name: str | None = None) -> type[BoundedH11]:
    """A :class:`BoundedH11` for one listener.

    ``refusal`` is the complete response written to a connection beyond ``max_connections``;
    ``log_name``, when given, is the logger the protocol writes to instead of uvicorn's (and it
    writes no access log).
    """

    class Bounded(BoundedH11):
        pass

    Bounded.limits = limits
    Bounded.refusal = refusal
    Bounded.log_name = log_name
    Bounded.waiting = {}
    return Bounded


@dataclass
class _Seen:
    at: float
    """When the message was last let through."""
    left_out: int = 0


class RepeatFilter(logging.Filter):
    """Lets a log message through once per ``window`` seconds; the repeats are counted, and the
    next line let through says how many were left out.

    Messages are told apart by logger, level, text (the format, not its arguments) and the
    exception logged with them, if any. At most
    ``max_messages`` different ones are tracked; past that, new ones are left out until a window
    ends, and counted in the next line let through.
    """

    def __init__(
        self, window: float = 60.0, *, max_messages: int = 20, clock: Callable[[], float] = time.monotonic
    ) -> None:
        super().__init__()
        self._window = window
        self._max_messages = max_messages
        self._clock = clock
        self._seen: dict[tuple[str, int, str], _Seen] = {}
        self._overflow = 0
        self._since = clock()

    def filter(self, record: logging.LogRecord) -> bool:
        now = self._clock()
        if now - self._since >= self._window:
            self._seen = {key: seen for key, seen in self._seen.items() if seen.left_out}
            self._since = now
        text = str(record.msg)[:500]
        if record.exc_info and record.exc_info[1] is not None:
            error = record.exc_info[1]
            text += f" [{type(error).__name__}: {str(error)[:200]}]"
        key = (record.name, record.levelno, text)
        seen = self._seen.get(key)
        if seen is None:
            if len(self._seen) >= self._max_messages:
                self._overflow += 1
                return False
            self._seen[key] = _Seen(now)
            return self._annotate(record, 0)
        if now - seen.at < self._window:
            seen.left_out += 1
            return False
        left_out, seen.at, seen.left_out = seen.left_out, now, 0
        return self._annotate(record, left_out)

    def _annotate(self, record: logging.LogRecord, left_out: int) -> bool:
        notes = []
        if left_out:
            notes.append(f"{left_out} more like it in the last {self._window:g} s were not logged")
        if self._overflow:
            notes.append(f"{self._overflow} other repeated messages were not logged")
            self._overflow = 0
        if notes:
            record.msg = f"{record.msg} ({'; '.join(notes)})"
        return True


@contextlib.contextmanager
def repeats_limited(*logger_names: str, window: float = 60.0) -> Iterator[RepeatFilter]:
    """A :class:`RepeatFilter` on the named loggers while the block runs."""
    repeat = RepeatFilter(window)
    loggers = [logging.getLogger(name) for name in logger_names]
    for logger in loggers:
        logger.addFilter(repeat)
    try:
        yield repeat
    finally:
        for logger in loggers:
            logger.removeFilter(repeat)
