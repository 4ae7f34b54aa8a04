"""SuspendedExecutions: parked executions survive until taken, expire on a timer, finish with results."""

from __future__ import annotations

import asyncio
from pathlib import Path

from core.executor.executor_kit import STDIO_SERVER
from ipybox_core import ApprovalRequest, CodeExecutor, ExecutionResult
from ipybox_core.mcp_server._suspended import SuspendedExecutions


async def test_parked_execution_is_taken_with_its_context_or_cancelled_when_abandoned(tmp_path: Path) -> None:
    async with CodeExecutor(workspace=tmp_path) as ex:
        await ex.register_mcp_server("test", STDIO_SERVER)
        parked: SuspendedExecutions[int] = SuspendedExecutions(abandon_after=0.3, abandon_reason="gone away")

        execution = ex.stream("from mcptools.test import add\nprint(add(a=1, b=2))")
        request = await execution.next_stop()
        assert isinstance(request, ApprovalRequest)
        parked.park("k1", execution, request, 500)
        taken = parked.take("k1")
        assert taken is not None
        assert (taken.request, taken.context) == (request, 500)
        assert parked.take("k1") is None
        await request.accept()
        result = await execution.next_stop()
        assert isinstance(result, ExecutionResult)
        assert result.text.strip() == "3"

        execution = ex.stream("from mcptools.test import add\nadd(a=1, b=2)")
        request = await execution.next_stop()
        assert isinstance(request, ApprovalRequest)
        parked.park("k2", execution, request, 0)
        for _ in range(100):  # nobody comes back: the timer cancels it
            if execution.done:
                break
            await asyncio.sleep(0.05)
        assert execution.done
        assert "k2" not in parked
        assert request.decision is not None
        assert request.decision.reason == "gone away"
        assert not ex.busy
