"""The service's parked executions: whoever drops a pending call is the one the audit log names
(``timeout`` for the abandonment timer, ``shutdown``, ``moved-on``), not ``user``."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from mcp_server_kit import TEST_SERVER

from ipybox_core.approval import ApprovalRequest
from ipybox_core.executor import CodeExecutor
from ipybox_core.mcp_server._parked import ParkedExecutions

CALL = "from mcptools.test import count\ncount()"


def _deciders(audit: Path) -> list[str]:
    return [json.loads(line)["decided_by"] for line in audit.read_text().splitlines()]


@pytest.mark.parametrize(
    ("how", "decider"), [("timer", "timeout"), ("shutdown", "shutdown"), ("moved-on", "moved-on")]
)
async def test_a_parked_execution_dropped_is_audited_with_its_decider(
    tmp_path: Path, how: str, decider: str
) -> None:
    audit = tmp_path / "audit.jsonl"
    parked: ParkedExecutions[None] = ParkedExecutions(abandon_after=0.2 if how == "timer" else None)
    async with CodeExecutor(
        workspace=tmp_path / "ws", audit_log=audit, mcp_servers={"test": TEST_SERVER}
    ) as executor:
        execution = executor.stream(CALL)
        request = await execution.next_stop()
        assert isinstance(request, ApprovalRequest)
        parked.park("call", execution, request, None)
        if how == "timer":
            while "call" in parked:  # nobody comes back: the timer abandons it
                await asyncio.sleep(0.05)
            await parked.settle()
        else:
            assert await parked.cancel_all("stopping", decided_by=decider) == 1
        assert not request.pending and request.decision is not None
        assert request.decision.decided_by == decider
    assert _deciders(audit) == [decider]
