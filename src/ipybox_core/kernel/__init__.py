"""Stateful IPython kernels: start (optionally wrapped by a sandbox launcher), execute with a stream of
typed events, timeouts, interrupts, death detection and bounded output.

:class:`KernelBackend` is what the executor needs from a kernel; :mod:`ipybox_core.kernel.gateway`
has the backend for kernels on a Jupyter Kernel Gateway / Enterprise Gateway."""

from __future__ import annotations

from ipybox_core.kernel.backend import KernelBackend
from ipybox_core.kernel.config import KernelConfig
from ipybox_core.kernel.deadline import Deadline
from ipybox_core.kernel.events import (
    ClearOutput,
    DisplayData,
    ExecutionError,
    ExecutionFinished,
    ExecutionStatus,
    KernelEvent,
    OutputTruncated,
    StreamName,
    StreamText,
)
from ipybox_core.kernel.kernel import Kernel
from ipybox_core.kernel.launcher import InterruptMode, KernelLauncher, LaunchSpec
from ipybox_core.kernel.output import ExecutionOutput, OutputCollector

__all__ = [
    "ClearOutput",
    "Deadline",
    "DisplayData",
    "ExecutionError",
    "ExecutionFinished",
    "ExecutionOutput",
    "ExecutionStatus",
    "InterruptMode",
    "Kernel",
    "KernelBackend",
    "KernelConfig",
    "KernelEvent",
    "KernelLauncher",
    "LaunchSpec",
    "OutputCollector",
    "OutputTruncated",
    "StreamName",
    "StreamText",
]
