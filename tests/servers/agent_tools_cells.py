"""Code cells the adapters' agent-tools tests run (issue 24): the same calls in every framework."""

from __future__ import annotations

_CALLS = """
from agent_tools import lookup, refund, whoami
from mcptools.test import add
from ipybox_core.errors import ToolError
print(whoami())
try:
    lookup(order="X-9")
except ToolError as error:
    print("error:", error)
for order in ["A-1", "A-2"]:
{refund}
print(add(a=20, b=22))
"""

REFUND_CELL = _CALLS.format(
    refund='    try:\n        print(refund(order=order))\n    except PermissionError as error:\n        print("refused:", error)'
)
"""Calls an agent's ``whoami`` (reads the run's context), ``lookup`` (raises the framework's retry
or error for ``X-9``) and ``refund`` (needs approval) twice, then the test server's ``add``."""

CALLS_CELL = _CALLS.format(refund="    print(refund(order=order))")
"""The same calls, with a refused ``refund`` left to end the cell (its ``PermissionError`` shows)."""
