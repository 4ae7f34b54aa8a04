"""One lifetime of the MCP connection to the service, held by a task of its own.

The MCP client keeps its transport in a task group whose cancel scope belongs to the task that
entered it: entered by the application (a FastAPI lifespan), a dropped connection would cancel
that task. A :class:`Link` enters the client in a task of its own instead, so an outage ends only
that task; each call made over the link raises :class:`~ipybox_core.errors.ServiceError` in the
task that made it, and the next call opens a new link (a fresh client: the old one cannot be
entered again).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import TypeVar

from mcp.client.session import ClientSession

T = TypeVar("T")


class LinkDown(Exception):
    """The link's connection ended (the service stopped, or the network went away)."""


Connect = Callable[[], AbstractAsyncContextManager[ClientSession]]
"""Opens one connection: an entered MCP client session while the context lasts."""


class Link:
    """An open MCP client session, owned by its own task until :meth:`aclose`."""

    def __init__(self, connect: Connect) -> None:
        self._connect = connect
        self._ready: asyncio.Future[ClientSession] = asyncio.get_running_loop().create_future()
        self._stop = asyncio.Event()
        self._error: BaseException | None = None
        self._task = asyncio.create_task(self._hold(), name="ipybox-service-link")

    async def open(self) -> None:
        """Wait until the client is connected; raise what prevented it."""
        await asyncio.shield(self._ready)

    @property
    def alive(self) -> bool:
        """True while the connection stands (or is still being opened)."""
        return not self._task.done()

    async def run(self, call: Callable[[ClientSession], Awaitable[T]]) -> T:
        """``call(session)`` in the calling task; :class:`LinkDown` if the connection ends first."""
        session = await asyncio.shield(self._ready)
        work = asyncio.ensure_future(call(session))
        try:
            await asyncio.wait({work, self._task}, return_when=asyncio.FIRST_COMPLETED)
        except BaseException:
            work.cancel()
            raise
        if work.done():
            return work.result()
        work.cancel()
        with contextlib.suppress(BaseException):
            await work
        raise LinkDown(self._ended())

    async def aclose(self) -> None:
        """End the connection and wait for its task."""
        self._stop.set()
        await asyncio.wait({self._task})

    def _ended(self) -> str:
        error = self._error
        if error is None or isinstance(error, asyncio.CancelledError):
            return "the connection was closed"
        return _describe(error)

    async def _hold(self) -> None:
        """Enter the client here, so that its end (whatever ends it) ends only this task."""
        try:
            async with self._connect() as session:
                self._ready.set_result(session)
                await self._stop.wait()
        except BaseException as error:
            self._error = error
        if not self._ready.done():
            failure = self._error
            self._ready.set_exception(failure if isinstance(failure, Exception) else LinkDown(self._ended()))


def _describe(error: BaseException) -> str:
    """The innermost messages of ``error`` (task groups wrap the transport's failure)."""
    if isinstance(error, BaseExceptionGroup):
        return "; ".join(_describe(inner) for inner in error.exceptions)
    return str(error) or type(error).__name__
