"""The kernel backends the kernel tests run on: a local kernel and one on a real Jupyter Kernel
Gateway (``tests/servers/gateway.py``), both behind the same execute loop."""

from __future__ import annotations

import pytest

from ipybox_core.kernel import Kernel, KernelConfig
from ipybox_core.kernel._base import KernelBase
from ipybox_core.kernel.gateway import GatewayKernel

BACKENDS = ["local", "gateway"]


def make_kernel(request: pytest.FixtureRequest, backend: str, config: KernelConfig) -> KernelBase:
    """An unstarted kernel of ``backend`` (start it with ``async with``)."""
    if backend == "gateway":
        gateway = request.getfixturevalue("kernel_gateway")
        return GatewayKernel(gateway.config(), config)
    return Kernel(config)
