"""What the executor needs from a kernel, wherever it runs: the local :class:`~ipybox_core.kernel.Kernel`
and the :class:`~ipybox_core.kernel.gateway.GatewayKernel` (a Jupyter Kernel/Enterprise Gateway)."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Mapping, Sequence
from pathlib import Path
from typing import Protocol, runtime_checkable

from ipybox_core.kernel.deadline import Deadline
from ipybox_core.kernel.events import KernelEvent
from ipybox_core.kernel.output import ExecutionOutput


@runtime_checkable
class KernelBackend(Protocol):
    """A stateful kernel that executes code and yields the same typed events on every backend.

    Semantics every backend keeps: one execution at a time (a second one raises
    :class:`~ipybox_core.errors.ExecutorBusy`); a ``timeout`` (seconds or a pausable
    :class:`Deadline`) interrupts the code and raises :class:`~ipybox_core.errors.ExecutionTimeout`
    with the state kept, or restarts a kernel that ignores the interrupt; a kernel that dies raises
    :class:`~ipybox_core.errors.KernelDied` and the next execution gets a fresh one.
    """

    @property
    def is_alive(self) -> bool:
        """Whether the kernel is running (as far as the backend knows without asking)."""
        ...

    @property
    def generation(self) -> int:
        """How many fresh kernel states were started so far (1 after start; +1 per restart/revival)."""
        ...

    def execute(
        self, code: str, timeout: float | Deadline | None = None, *, silent: bool = False
    ) -> AsyncGenerator[KernelEvent, None]:
        """Run ``code`` and yield its events; the last one is :class:`ExecutionFinished`."""
        ...

    async def run(
        self, code: str, timeout: float | Deadline | None = None, *, silent: bool = False
    ) -> ExecutionOutput:
        """Run ``code`` and collect its events into an :class:`ExecutionOutput`."""
        ...

    async def settle_output(self, max_wait: float = 0.1) -> None:
        """Wait (briefly) until output the kernel already sent was handed out by the running
        execution: called before surfacing an approval request, which arrives by another route."""
        ...

    async def interrupt(self) -> None:
        """Interrupt the running code (``KeyboardInterrupt`` in it); no-op when idle."""
        ...

    async def restart(self) -> None:
        """Replace the kernel's state with a fresh one."""
        ...

    async def update_environment(
        self, env: Mapping[str, str] | None = None, python_path: Sequence[Path] = ()
    ) -> None:
        """Set environment variables and prepend ``sys.path`` entries, now and after every restart."""
        ...

    async def shutdown(self, *, now: bool = False) -> None:
        """Stop the kernel and release everything it holds. Idempotent."""
        ...
