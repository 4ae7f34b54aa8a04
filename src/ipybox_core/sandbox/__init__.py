"""OS sandboxing of the kernel: a policy, a Linux backend (bubblewrap), a macOS backend (Seatbelt).

``sandbox_launcher(policy, workspace=...)`` returns the :class:`~ipybox_core.kernel.launcher.KernelLauncher`
for this platform; ``resolve_sandbox`` turns the executor's ``sandbox=`` argument into a policy.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from ipybox_core.errors import SandboxUnavailable
from ipybox_core.kernel.launcher import KernelLauncher
from ipybox_core.sandbox.bwrap import BwrapLauncher
from ipybox_core.sandbox.macos import SeatbeltLauncher, SeatbeltProfile, SrtSettings
from ipybox_core.sandbox.policy import (
    DEFAULT_HIDDEN_NAMES,
    DEFAULT_HIDDEN_PATHS,
    DEFAULT_SYSTEM_PATHS,
    ResourceLimits,
    SandboxPolicy,
    resolve_sandbox,
)
from ipybox_core.sandbox.probe import probe_sandbox

__all__ = [
    "DEFAULT_HIDDEN_NAMES",
    "DEFAULT_HIDDEN_PATHS",
    "DEFAULT_SYSTEM_PATHS",
    "BwrapLauncher",
    "ResourceLimits",
    "SandboxPolicy",
    "SeatbeltLauncher",
    "SeatbeltProfile",
    "SrtSettings",
    "probe_sandbox",
    "resolve_sandbox",
    "sandbox_launcher",
]


def sandbox_launcher(
    policy: SandboxPolicy,
    *,
    workspace: str | os.PathLike[str],
    sockets: Sequence[str | os.PathLike[str]] = (),
) -> KernelLauncher:
    """The launcher that confines kernels by ``policy`` on this platform.

    ``workspace`` is the kernel's read-write directory; ``sockets`` are host unix sockets the kernel
    may connect to outside its runtime directory (e.g. the tool server's ``tools.sock``). Raises
    :class:`~ipybox_core.errors.SandboxUnavailable` (with the reason and the fix) when the sandbox
    cannot run here; ipybox never silently runs the kernel unsandboxed.
    """
    if sys.platform.startswith("linux"):
        return BwrapLauncher(policy, workspace=workspace, sockets=sockets)
    if sys.platform == "darwin":
        return SeatbeltLauncher(policy, workspace=workspace, sockets=sockets)
    probe_sandbox()  # raises: no backend on this platform
    raise SandboxUnavailable(f"no ipybox sandbox backend for {sys.platform}")
