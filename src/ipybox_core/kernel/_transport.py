"""What the execute loop needs from the connection to one kernel: local ZMQ channels or a gateway's
websocket (see :mod:`._loop`)."""

from __future__ import annotations

from typing import Any, Literal, Protocol

Message = dict[str, Any]
"""A decoded kernel message: ``header``, ``msg_type``, ``parent_header``, ``content``."""

Channel = Literal["shell", "control"]


class Transport(Protocol):
    """One execution's view of a running kernel.

    ``output`` and ``reply`` return None when nothing arrives within ``timeout`` seconds; they and
    ``check`` raise :class:`~ipybox_core.errors.KernelDied` (or ``KernelError``) once the kernel is
    gone, dead or replaced.
    """

    restart_failures: tuple[type[Exception], ...]
    """What a failed :meth:`restart` raises (reported in the timeout's message, not raised)."""

    async def send(self, channel: Channel, msg_type: str, content: dict[str, Any]) -> str:
        """Send a request; returns its msg_id."""
        ...

    async def output(self, timeout: float) -> Message | None:
        """The next iopub message."""
        ...

    async def reply(self, timeout: float) -> Message | None:
        """The next shell message (replies)."""
        ...

    async def check(self) -> None:
        """Raise if the kernel died, was replaced or became unreachable (called while it is quiet)."""
        ...

    def interrupt(self) -> None:
        """Interrupt the running code (returns at once)."""
        ...

    async def settle(self) -> None:
        """Wait until the interrupts sent so far were delivered."""
        ...

    def finish(self, *, abandoned: bool) -> None:
        """The execution ended; ``abandoned``: its consumer stopped listening, so stop the code."""
        ...

    async def restart(self) -> None:
        """Replace the kernel with a fresh one (a timed-out kernel ignored its interrupts)."""
        ...
