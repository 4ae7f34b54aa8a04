"""What one tool server (one kernel) may spend on parsed request bodies at once.

A JSON body parses into objects costing up to ~30 times its bytes. So a call keeps its body's
bytes while it waits (see :class:`~ipybox_core.approval.request.JsonArguments`), a large body is
parsed by one worker thread at a time, and the parsed arguments of calls that run are bounded in
bytes of JSON: what a kernel can make the application hold stays in proportion to the request limit.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import AsyncIterator, Callable
from typing import TypeVar

PARSE_IN_THREAD_ABOVE = 64 * 1024
"""Bodies this large are parsed off the event loop, one at a time per tool server."""

T = TypeVar("T")


class ParseBudget:
    """One large parse at a time, and at most ``budget`` bytes of JSON whose parsed arguments are
    in use (by calls that run); a call larger than the budget runs once nothing else holds any.

    Callers beyond the budget wait in order, holding only their bytes.
    """

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self.used = 0
        self._waiting: deque[tuple[int, asyncio.Future[None]]] = deque()
        self._parsing = asyncio.Lock()

    async def parse(self, size: int, parse: Callable[[], T]) -> T:
        """``parse()``, in a worker thread (after earlier large parses) if ``size`` is large."""
        if size <= PARSE_IN_THREAD_ABOVE:
            return parse()
        async with self._parsing:
            return await asyncio.to_thread(parse)

    @contextlib.asynccontextmanager
    async def hold(self, size: int) -> AsyncIterator[None]:
        """Count ``size`` bytes as in use for the block, waiting until they fit."""
        admitted = asyncio.get_running_loop().create_future()
        self._waiting.append((size, admitted))
        self._admit()
        try:
            await admitted
        except asyncio.CancelledError:
            if admitted.done() and not admitted.cancelled():  # let in, then cancelled
                self._release(size)
            raise
        try:
            yield
        finally:
            self._release(size)

    def _release(self, size: int) -> None:
        self.used -= size
        self._admit()

    def _admit(self) -> None:
        while self._waiting:
            size, admitted = self._waiting[0]
            if admitted.done():  # its caller went away while waiting
                self._waiting.popleft()
                continue
            if self.used and self.used + size > self.budget:
                return
            self._waiting.popleft()
            self.used += size
            admitted.set_result(None)
