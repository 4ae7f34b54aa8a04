"""``ipybox serve --kernel-gateway``: the service's kernels run on a real Jupyter Kernel Gateway."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from service_kit import start_service

from ipybox_core.approval import ApprovalRequest
from ipybox_core.remote import RemoteSessions
from servers.gateway import LocalGateway


@pytest.mark.asyncio
async def test_a_service_on_a_gateway_keeps_state_and_an_approval_across_clients(
    tmp_path: Path, kernel_gateway: LocalGateway, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("IPYBOX_GATEWAY_TOKEN", kernel_gateway.token)
    before = {kernel["id"] for kernel in kernel_gateway.kernels()}
    service = start_service(tmp_path / "ws", "--kernel-gateway", kernel_gateway.url)
    try:
        async with RemoteSessions(service.url, token=service.token, client_name="a") as first:
            executor = (await first.session("gw")).executor
            pid = (await executor.stream("import os\nx = 7\nprint(os.getpid())").wait()).text.strip()
            code = "from mcptools.test import add\nprint(add(a=x, b=1))"
            stop = await executor.stream(code, call_id="c").next_stop()
            assert isinstance(stop, ApprovalRequest)
        assert {kernel["id"] for kernel in kernel_gateway.kernels()} - before, (
            "the session's kernel runs on the gateway"
        )
        async with RemoteSessions(service.url, token=service.token, client_name="b") as second:
            execution = await (await second.session("gw")).executor.reattach("c")
            assert execution is not None
            request = await execution.next_stop()
            assert isinstance(request, ApprovalRequest)
            await request.accept()
            assert (await execution.wait()).text.strip() == "8"
        assert int(pid) != os.getpid()
    finally:
        assert service.stop() == 0
    assert {kernel["id"] for kernel in kernel_gateway.kernels()} <= before, (
        "the service shut its gateway kernels down"
    )
