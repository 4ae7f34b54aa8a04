"""What the agent-tool benchmarks share: the test MCP server and the kernel cell of one round.

The cell times ``add`` (an agent tool the adapter lets through), ``add_ruled`` (one the executor's
rule lets through) and the test server's ``add`` (MCP, by rule), ``calls`` calls each, and prints
the seconds per call as JSON: ``{"asked": ..., "ruled": ..., "mcp": ...}``.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent.parent / "tests"))
from servers import PYTHON, SERVE_SCRIPT

SERVER = {"command": PYTHON, "args": [str(SERVE_SCRIPT), "stdio"], "env": {"PYTHONUNBUFFERED": "1"}}
KERNEL_ROUND = """\
import json, time
from agent_tools import add, add_ruled
from mcptools.bench import add as mcp_add

def _per_call(function, calls={calls}):
    function(a=0, b=0)
    started = time.perf_counter()
    for i in range(calls):
        function(a=i, b=1)
    return (time.perf_counter() - started) / calls

print(json.dumps({{"asked": _per_call(add), "ruled": _per_call(add_ruled), "mcp": _per_call(mcp_add)}}))
"""
