"""Real MCP test servers shared by the whole test suite.

- :mod:`servers.tools` builds one :class:`mcp.server.MCPServer` tool set (nested objects, enums,
  arrays, keyword-named params, structured and unstructured output, images, failures, sleeps,
  environment reporting, a crash switch, a counter).
- ``serve.py`` runs that tool set over stdio, or over Streamable HTTP (``/mcp``) and SSE (``/sse``)
  from one process on a free loopback port.
- ``raw_server.py`` is a hand-written, deliberately off-spec stdio server (no SDK) that starts fast.
- :mod:`servers.fixtures` holds the pytest fixtures (register with ``pytest_plugins``).
"""

from __future__ import annotations

import sys
from pathlib import Path

SERVERS_DIR = Path(__file__).parent
SERVE_SCRIPT = SERVERS_DIR / "serve.py"
RAW_SERVER_SCRIPT = SERVERS_DIR / "raw_server.py"
PYTHON = sys.executable
