"""Shared test configuration: the test MCP servers' fixtures for the whole suite.

Optional prerequisites are checked with :func:`prerequisites.require`.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

pytest_plugins = ["servers.fixtures"]

SLOWEST_FILES = (
    "test_benchmarks.py",
    "examples/test_examples.py",
    "test_code_quality.py",
    "docs/test_install.py",
)
"""Test files of a minute or more each (paths under ``tests/``), slowest first."""


def pytest_configure(config: pytest.Config) -> None:
    """pytest-xdist runs the files in the order :func:`pytest_collection_modifyitems` gives them
    (by default it reorders them by their number of tests)."""
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """:data:`SLOWEST_FILES` first, then the other files by their number of tests, most first (each
    file keeps its own order).

    ``-n 2 --dist loadfile`` hands the files to the two workers in this order. By number of tests
    alone the benchmarks (17 tests, 7 minutes in one worker beside a second suite) began halfway
    through the run and the lint checks (4 tests, a minute of mypy) near its end, so one worker
    could still be on them when the other had nothing left to do.
    """
    tests = Path(__file__).resolve().parent
    rank = {tests / name: index for index, name in enumerate(SLOWEST_FILES)}
    counts = Counter(item.path for item in items)
    items.sort(key=lambda item: (rank.get(item.path, len(rank)), -counts[item.path]))
