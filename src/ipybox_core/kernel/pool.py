"""A pool of pre-started kernels, handed out in milliseconds."""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from types import TracebackType

from ipybox_core.errors import ConfigError, ExecutorClosed
from ipybox_core.kernel.config import KernelConfig
from ipybox_core.kernel.kernel import Kernel

logger = logging.getLogger(__name__)


class KernelPool:
    """Keeps ``size`` kernels started with ``config`` ready; :meth:`acquire` takes one.

    A kernel is handed out once and never returns to the pool: the caller owns it and shuts it
    down. Taking one starts a replacement in the background. :meth:`close` shuts down the kernels
    still in the pool (not the ones handed out). Use ``async with KernelPool(config, size=2) as pool``
    or call :meth:`start` (optional: the first :meth:`acquire` starts the pool too).
    """

    def __init__(self, config: KernelConfig | None = None, size: int = 1) -> None:
        if size < 1:
            raise ConfigError(f"a kernel pool needs size >= 1, got {size}")
        self.config = config or KernelConfig()
        self.size = size
        self._slots: deque[asyncio.Task[Kernel]] = deque()
        self._started = False
        self._closed = False

    async def __aenter__(self) -> KernelPool:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def start(self) -> None:
        """Begin starting the pool's kernels in the background (returns immediately)."""
        self._check_open()
        self._started = True
        self._fill()

    @property
    def ready(self) -> int:
        """How many kernels are started and waiting to be acquired."""
        return sum(1 for task in self._slots if task.done() and not task.cancelled() and not task.exception())

    async def acquire(self) -> Kernel:
        """A started kernel with fresh state, owned by the caller from now on.

        Waits for a kernel to finish starting if none is ready; raises
        :class:`~ipybox_core.errors.KernelStartError` if that start fails.
        """
        self._check_open()
        if not self._started:
            await self.start()
        while True:
            task = self._take()
            self._fill()
            try:
                kernel = await asyncio.shield(task)
            except asyncio.CancelledError:
                if not task.done() and not self._closed:
                    self._slots.appendleft(task)  # our caller was cancelled: keep the kernel pooled
                elif not task.done():
                    task.cancel()
                raise
            if kernel.is_alive:
                return kernel
            logger.warning("a pooled kernel died before it was acquired; taking another one")
            await kernel.shutdown(now=True)

    def _take(self) -> asyncio.Task[Kernel]:
        for task in list(self._slots):
            if task.done() and (task.cancelled() or task.exception() is not None):
                self._slots.remove(task)
                error = None if task.cancelled() else task.exception()
                logger.warning("a pooled kernel failed to start: %r", error)
        for task in self._slots:
            if task.done():
                self._slots.remove(task)
                return task
        if not self._slots:
            self._fill()
        return self._slots.popleft()

    def _fill(self) -> None:
        while len(self._slots) < self.size:
            task = asyncio.create_task(Kernel.start(self.config), name="ipybox-pool-kernel-start")
            self._slots.append(task)

    async def close(self) -> None:
        """Shut down every kernel still in the pool and stop starting new ones. Idempotent."""
        self._closed = True
        tasks = list(self._slots)
        self._slots.clear()
        for task in tasks:
            if not task.done():
                task.cancel()
        results = await asyncio.gather(*tasks, return_exceptions=True)
        kernels = [result for result in results if isinstance(result, Kernel)]
        await asyncio.gather(*(kernel.shutdown(now=True) for kernel in kernels), return_exceptions=True)

    def _check_open(self) -> None:
        if self._closed:
            raise ExecutorClosed("the kernel pool is closed")
