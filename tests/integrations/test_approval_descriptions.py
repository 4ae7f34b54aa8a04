"""The one-line description every adapter shows a human approver for a held call."""

from __future__ import annotations

import pytest

from ipybox_core.approval import ApprovalRequest
from ipybox_core.hosttools import HOST_SERVER
from ipybox_core.mcp import ToolAnnotations
from ipybox_integrations._session import approval_description


@pytest.mark.asyncio
async def test_an_mcp_call_a_host_tool_call_and_a_shell_command_are_told_apart() -> None:
    mcp = ApprovalRequest(
        kind="mcp",
        server="shop",
        tool="refund",
        args={"order": "o-1"},
        annotations=ToolAnnotations(destructive_hint=True),
    )
    host = ApprovalRequest(kind="mcp", server=HOST_SERVER, tool="refund", args={"order": "o-1"})
    shell = ApprovalRequest(kind="shell", server="", tool="shell", args={"command": "ls /"})
    assert (
        approval_description(mcp) == "The code calls MCP tool shop.refund [destructive]: refund(order='o-1')"
    )
    assert approval_description(host) == "The code calls the agent's tool refund: refund(order='o-1')"
    assert approval_description(shell) == "The code wants to run the shell command: ls /"
