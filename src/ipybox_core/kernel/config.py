"""How a kernel is started and how its executions are bounded."""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ipybox_core.errors import ConfigError
from ipybox_core.kernel.launcher import InterruptMode, KernelLauncher
from ipybox_core.kernel.output import DEFAULT_OUTPUT_LIMIT


@dataclass(frozen=True)
class KernelConfig:
    """Settings of a :class:`~ipybox_core.kernel.Kernel` (and of every kernel of a pool)."""

    cwd: Path | None = None
    """Working directory of the kernel (the workspace); the current directory when None."""
    env: Mapping[str, str] = field(default_factory=dict)
    """Environment variables for the kernel. The host's environment is *not* inherited: the kernel
    gets only these plus what it needs (``PATH``, ``HOME``, ``LANG``/``LC_*``, ``TZ``, ``TMPDIR``,
    ``MPLBACKEND``, ``PYTHONPATH``, ``IPYTHONDIR``, ``IPYBOX_RUNTIME_DIR``). Values here win."""
    python_path: Sequence[Path] = ()
    """Directories put in front of the kernel's ``sys.path`` (through ``PYTHONPATH``)."""
    launcher: KernelLauncher | None = None
    """Wraps the launch command, e.g. in a sandbox."""
    shell_approval: bool = False
    """Ask ``ipybox_core.runtime.approve_shell_command`` before every ``!cmd``/``%%bash``/... runs."""
    output_limit: int = DEFAULT_OUTPUT_LIMIT
    """Characters of stream text an execution yields live (the last ``output_limit // 2`` are kept
    and yielded at the end), and the size of :attr:`ExecutionOutput.text`."""
    reset_cwd: bool = False
    """Change back to ``cwd`` after every execution."""
    startup_timeout: float = 60.0
    """Seconds a kernel may take to become ready."""
    runtime_dir: Path | None = None
    """The kernel's runtime directory: connection file, ipc sockets, log, and the place for the tool
    server's socket. None: the kernel creates a private one (``/tmp/ipybox-XXXXXXXX``, mode 0700)
    and removes it at shutdown. A path: that existing directory is used as is and kept; the kernel
    names its files ``kernel-<id>*`` and removes only those (several kernels may share it, but a
    sandboxed kernel can then see the others' files). Unix socket paths are limited to ~104 bytes."""
    python: str = sys.executable
    """The Python interpreter that runs the kernel (needs ``ipykernel``)."""
    interrupt_mode: InterruptMode | None = None
    """``"signal"`` (SIGINT to the kernel's process group) or ``"message"`` (an ``interrupt_request``
    on the control channel). Default: the launcher's mode, else ``"signal"``."""
    interrupt_grace: float = 5.0
    """Seconds a kernel gets to react to a timeout's interrupt before it is restarted."""
    shutdown_grace: float = 2.0
    """Seconds an idle kernel gets to exit cleanly on shutdown before it is killed."""
    hidden_frame_paths: Sequence[Path] = ()
    """Directories whose frames are removed from tracebacks, besides the ``ipybox_core`` package."""
    kernel_args: Sequence[str] = ()
    """Extra command-line options for ``ipykernel_launcher`` (traitlets, e.g. ``--IPKernelApp.x=y``)."""

    def __post_init__(self) -> None:
        # Be lenient with plain strings for paths (frozen: assign through object.__setattr__).
        for name in ("cwd", "runtime_dir"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, Path):
                object.__setattr__(self, name, Path(value))
        object.__setattr__(self, "python_path", tuple(Path(p) for p in self.python_path))
        object.__setattr__(self, "hidden_frame_paths", tuple(Path(p) for p in self.hidden_frame_paths))
        object.__setattr__(self, "kernel_args", tuple(self.kernel_args))
        object.__setattr__(self, "env", dict(self.env))
        if self.output_limit < 1:
            raise ConfigError(f"output_limit must be a positive number of characters: {self.output_limit}")
        for name in ("startup_timeout", "interrupt_grace", "shutdown_grace"):
            value = getattr(self, name)
            if not value > 0:
                raise ConfigError(f"{name} must be a positive number of seconds, got {value!r}")
        if self.interrupt_mode not in (None, "signal", "message"):
            raise ConfigError(f"interrupt_mode must be 'signal' or 'message', got {self.interrupt_mode!r}")
        for key, value in self.env.items():
            if not isinstance(key, str) or not isinstance(value, str) or not key or "=" in key:
                raise ConfigError(f"invalid environment variable {key!r}={value!r}")

    @property
    def effective_interrupt_mode(self) -> InterruptMode:
        if self.interrupt_mode is not None:
            return self.interrupt_mode
        if self.launcher is not None:
            return self.launcher.interrupt_mode
        return "signal"
