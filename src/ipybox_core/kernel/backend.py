"""What the executor needs from a kernel, wherever it runs: the local :class:`~ipybox_core.kernel.Kernel`
and the :class:`~ipybox_core.kernel.gateway.GatewayKernel` (a Jupyter Kernel/Enterprise Gateway)."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Mapping
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

    async def output_reached(self, mark: str | None) -> None:
        """Wait until the running execution handed out the kernel's output up to ``mark``, the
        output mark the kernel published before it sent an approval request (which arrives by
        another route); returns at once for None, when the execution ended, or after a few seconds."""
        ...

    async def interrupt(self) -> None:
        """Interrupt the running code (``KeyboardInterrupt`` in it); no-op when idle."""
        ...

    async def restart(self) -> None:
        """Replace the kernel's state with a fresh one."""
        ...

    def install_package(self, path: str, files: Mapping[str, str] | Path) -> None:
        """Make the package directory ``path`` (e.g. ``"mcptools/github"``, ``files`` as relative
        path → text or a local directory) importable in the kernel, now and after every restart. A
        local kernel finds packages on its ``python_path`` (nothing to do); a remote one gets them
        shipped."""
        ...

    def uninstall_package(self, path: str) -> None:
        """Remove a package installed with :meth:`install_package`."""
        ...

    async def shutdown(self, *, now: bool = False) -> None:
        """Stop the kernel and release everything it holds. Idempotent."""
        ...
