"""What the examples start besides themselves: a second MCP server, and ``ipybox serve``."""
