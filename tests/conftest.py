"""Shared test configuration: the test MCP servers' fixtures for the whole suite.

Optional prerequisites are checked with :func:`prerequisites.require`.
"""

from __future__ import annotations

pytest_plugins = ["servers.fixtures"]
