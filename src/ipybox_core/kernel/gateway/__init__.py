"""Kernels on a Jupyter Kernel Gateway or Enterprise Gateway (Kubernetes, YARN, Docker): the same
events and semantics as local kernels, over the gateway's REST API and websocket.

Needs the ``gateway`` extra (``websockets``) on the application side and ``pydantic`` in the kernel's
environment (for generated APIs); ipybox itself is shipped into each kernel as it starts.
"""

from __future__ import annotations

from ipybox_core.kernel.gateway.config import GatewayConfig
from ipybox_core.kernel.gateway.kernel import GatewayKernel

__all__ = ["GatewayConfig", "GatewayKernel"]
