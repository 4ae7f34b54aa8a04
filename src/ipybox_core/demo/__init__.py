"""The demo: a bundled MCP server, its generated API, and code whose tool calls you approve."""

from ipybox_core.demo.run import DEMO_CELLS, run_demo

__all__ = ["DEMO_CELLS", "run_demo"]
