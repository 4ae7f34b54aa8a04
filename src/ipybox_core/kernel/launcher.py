"""The hook through which a sandbox wraps the kernel's launch command."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol, runtime_checkable

InterruptMode = Literal["signal", "message"]


@dataclass(frozen=True)
class LaunchSpec:
    """How a kernel process is started.

    ``argv`` is the full command (``python -m ipykernel_launcher -f <connection file>``), ``env`` the
    complete environment of the started process (nothing else is inherited), ``cwd`` its working
    directory and ``runtime_dir`` the kernel's private host directory (connection file, bootstrap).

    A sandbox shows the kernel only what it needs of the runtime directory: ``ipc_dir`` writable
    (the kernel binds its sockets there) and ``kernel_files`` read-only (what the kernel reads at
    start). Nothing else of ``runtime_dir`` may be visible, let alone writable: the host reads and
    writes there. ``pass_fds`` are descriptors the started process inherits (and the launching
    code closes once it started).
    """

    argv: Sequence[str]
    env: Mapping[str, str]
    cwd: Path
    runtime_dir: Path
    ipc_dir: Path | None = None
    kernel_files: tuple[Path, ...] = ()
    pass_fds: tuple[int, ...] = ()


@runtime_checkable
class KernelLauncher(Protocol):
    """Wraps a kernel's launch, e.g. in bubblewrap. Implemented by the sandbox backends."""

    @property
    def interrupt_mode(self) -> InterruptMode:
        """``"message"`` when signals cannot reach the kernel through the wrapper."""
        ...

    def wrap(self, spec: LaunchSpec) -> LaunchSpec:
        """Return the spec to actually launch (argv prefixed, environment moved inside, ...)."""
        ...
