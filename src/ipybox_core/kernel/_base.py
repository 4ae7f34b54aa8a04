"""What both kernel backends share around the execute loop: one execution at a time, ``run``,
``async with``, the generation count, output marks."""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import AsyncGenerator
from contextlib import aclosing
from types import TracebackType
from typing import Self

from ipybox_core.errors import ExecutorClosed
from ipybox_core.kernel._execution import wait_until_not_busy
from ipybox_core.kernel._loop import LoopSettings, execute_loop
from ipybox_core.kernel._marks import OutputMarks
from ipybox_core.kernel._transport import Transport
from ipybox_core.kernel.config import KernelConfig
from ipybox_core.kernel.deadline import Deadline, as_deadline
from ipybox_core.kernel.events import ExecutionFinished, KernelEvent
from ipybox_core.kernel.output import ExecutionOutput, OutputCollector

# How long an approval request waits for its output mark at most (an honest kernel published the
# mark before it sent the request, so it is normally already read).
_MARK_WAIT = 5.0


class KernelBase(ABC):
    """A kernel backend: subclasses start the kernel and give the execute loop its transport."""

    def __init__(self, config: KernelConfig | None) -> None:
        self.config = config or KernelConfig()
        self._lifecycle = asyncio.Lock()
        self._generation = 0
        self._busy = False
        self._started = False
        self._closed = False
        self._hidden_prefixes: tuple[str, ...] = ()
        self._marks = OutputMarks()

    # --- subclass hooks -------------------------------------------------------------------------

    @abstractmethod
    async def _boot(self) -> None:
        """Start the kernel unless started (raises ``KernelStartError``)."""

    @abstractmethod
    async def _transport(self) -> Transport:
        """A transport to a running kernel for the next execution (revives a dead kernel)."""

    @abstractmethod
    async def shutdown(self, *, now: bool = False) -> None:
        """Stop the kernel and release everything it holds. Idempotent."""

    # --- lifecycle ------------------------------------------------------------------------------

    async def __aenter__(self) -> Self:
        await self._boot()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.shutdown()

    @property
    def generation(self) -> int:
        """How many fresh kernel states were started so far (1 after start; +1 per restart/revival)."""
        return self._generation

    def _check_open(self) -> None:
        if self._closed:
            raise ExecutorClosed("the kernel was shut down")

    # --- execution ------------------------------------------------------------------------------

    def _settings(self) -> LoopSettings:
        return LoopSettings(self.config.output_limit, self.config.interrupt_grace, self._hidden_prefixes)

    async def run(
        self, code: str, timeout: float | Deadline | None = None, *, silent: bool = False
    ) -> ExecutionOutput:
        """Execute ``code`` and collect everything into an :class:`ExecutionOutput`.

        An exception raised by the code is in ``output.error`` (not raised). Raises
        :class:`~ipybox_core.errors.ExecutionTimeout` and :class:`~ipybox_core.errors.KernelDied`
        like :meth:`execute`.
        """
        collector = OutputCollector(self.config.output_limit)
        async with aclosing(self.execute(code, timeout, silent=silent)) as events:
            async for event in events:
                collector.add(event)
        return collector.output()

    async def execute(
        self, code: str, timeout: float | Deadline | None = None, *, silent: bool = False
    ) -> AsyncGenerator[KernelEvent, None]:
        """Run ``code`` and yield its events as they happen; the last one is :class:`ExecutionFinished`.

        ``timeout`` (seconds, or a pausable :class:`Deadline`): when it runs out the code is
        interrupted and :class:`~ipybox_core.errors.ExecutionTimeout` raised once the kernel is idle
        again (state kept). A kernel that ignores the interrupt for ``config.interrupt_grace``
        seconds is restarted (state lost; the error says so). If the kernel dies,
        :class:`~ipybox_core.errors.KernelDied` is raised and the next execution starts a fresh
        kernel.

        Stream text beyond ``config.output_limit`` characters is held back; at the end come an
        :class:`OutputTruncated` event and the last ``output_limit // 2`` characters. Stopping the
        iteration early interrupts the code.

        ``silent=True`` is for bookkeeping code: no result value, no history entry, the execution
        count stays; printed text and errors still arrive.
        """
        self._check_open()
        await wait_until_not_busy(lambda: self._busy)
        self._busy = True
        try:
            transport = await self._transport()
            loop = execute_loop(transport, code, as_deadline(timeout), silent, self._settings(), self._marks)
            async with aclosing(loop) as events:
                async for event in events:
                    if isinstance(event, ExecutionFinished):
                        self._busy = False
                    yield event
        finally:
            self._busy = False

    async def output_reached(self, mark: str | None) -> None:
        """Wait until the running execution has handed out the kernel's output up to ``mark``
        (published by the kernel before it sent an approval request; None: no wait)."""
        if mark is not None:
            await self._marks.wait(mark, _MARK_WAIT)
