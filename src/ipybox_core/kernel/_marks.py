"""Output marks: where an approval request stands in the kernel's output stream.

Before a tool call the kernel-side runtime flushes stdout/stderr and publishes a mark (a message
with a random id) on the kernel's output channel, then sends the request with that id. The host
hands the request out once the execute loop has read the mark, so everything the code printed
before the call has been handed out first: the order is the kernel's, not a timing guess.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict

from ipybox_core.inkernel.runtime import OUTPUT_MARK_MSG

_REMEMBERED = 256
_MAX_ID = 64


def mark_of(message: dict[str, object]) -> str | None:
    """The id of an output-mark message, or None for any other message."""
    if message.get("msg_type") != OUTPUT_MARK_MSG:
        return None
    content = message.get("content")
    mark = content.get("mark") if isinstance(content, dict) else None
    return mark if isinstance(mark, str) and 0 < len(mark) <= _MAX_ID else None


class OutputMarks:
    """Marks read by the running execution, and waiters for marks not read yet.

    Between executions (and after one ended) nothing more will be read: waits return at once.
    """

    def __init__(self) -> None:
        self._seen: OrderedDict[str, None] = OrderedDict()
        self._waiters: dict[str, asyncio.Future[bool]] = {}
        self._reading = False

    def begin(self) -> None:
        """An execution starts reading the kernel's output."""
        self._seen.clear()
        self._reading = True

    def end(self) -> None:
        """The execution stopped reading: release every waiter."""
        self._reading = False
        self._seen.clear()
        for waiter in self._waiters.values():
            if not waiter.done():
                waiter.set_result(False)

    def seen(self, mark: str) -> None:
        """The execute loop read ``mark`` (and handed out all output before it)."""
        waiter = self._waiters.get(mark)
        if waiter is not None:
            if not waiter.done():
                waiter.set_result(True)
            return
        self._seen[mark] = None  # the request may not have arrived yet
        if len(self._seen) > _REMEMBERED:
            self._seen.popitem(last=False)

    async def wait(self, mark: str, timeout: float) -> bool:
        """Wait until ``mark`` was read; False if the execution ended or ``timeout`` passed first."""
        if mark in self._seen:
            return True
        if not self._reading or mark in self._waiters:
            return False
        waiter: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._waiters[mark] = waiter
        try:
            async with asyncio.timeout(timeout):
                return await waiter
        except TimeoutError:
            return False
        finally:
            del self._waiters[mark]
