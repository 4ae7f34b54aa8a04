"""The question ``ipybox mcp`` asks about a call stays in proportion to the call's arguments."""

from __future__ import annotations

import json

from ipybox_core.approval.request import ApprovalRequest, JsonArguments
from ipybox_core.mcp_server.approvals import approval_message


async def test_deeply_nested_arguments_do_not_blow_up_the_question() -> None:
    deep = b"[" * 390 + b",".join([b"0"] * 100_000) + b"]" * 390  # within the depth limit (400)
    body = b'{"server":"s","tool":"t","arguments":{"x":' + deep + b"}}"
    request = ApprovalRequest(kind="mcp", server="s", tool="t", args=JsonArguments(body))
    question = approval_message(request)
    assert len(question) < 2 * len(body) and json.loads(question.partition("arguments: ")[2]) == request.args
    # Control: the indented rendering of the same arguments is ~100x larger.
    assert len(json.dumps(request.args, indent=2)) > 100 * len(body)
    # small arguments are still shown indented
    small = ApprovalRequest(kind="mcp", server="s", tool="t", args={"path": "/x", "n": [1, 2]})
    assert '\n  "path": "/x",\n' in approval_message(small)
