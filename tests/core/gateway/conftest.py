"""One real Jupyter Kernel Gateway (loopback, token) for every gateway test; at the end it must run no
kernel and leave no process behind."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from gateway_kit import LocalGateway, kernelgateway_available, start_local_gateway

from prerequisites import require


@pytest.fixture(scope="session")
def kernel_gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalGateway]:
    require(
        kernelgateway_available(),
        "jupyter-kernel-gateway and websockets are not installed (pip install 'ipybox[gateway]')",
    )
    gateway = start_local_gateway(tmp_path_factory.mktemp("kernel-gateway"))
    try:
        yield gateway
        leftover = gateway.kernels()
    finally:
        survivors = gateway.stop()
    assert leftover == [], f"kernels left running on the gateway: {leftover}"
    assert survivors == set(), f"kernel processes survived the gateway: {survivors}"
