"""The hidden-path scan as it was before it decided by what a path is: the controls of the tests."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ipybox_core.sandbox._scan import TreeScan, scan_user_trees

OLD_SKIPPED_DIRS = frozenset({".git", "node_modules", "__pycache__"})
"""Directories the old scan never descended into."""


def old_scan(trees: Sequence[Path], patterns: Sequence[str], **options: Any) -> TreeScan:
    """The old scan: directories skipped by name, no identities (renamed, linked), no other names.

    Monkeypatch it over ``ipybox_core.sandbox._mounts.scan_user_trees`` to weaken a launch.
    """
    found = scan_user_trees(trees, patterns, **{**options, "known": frozenset()})
    found.matches = [path for path in found.matches if OLD_SKIPPED_DIRS.isdisjoint(Path(path).parts)]
    found.known, found.linked, found.covered_links = [], {}, set()
    return found
