"""Optional system components the tests need, and how a missing one is reported.

Tests that need an optional component (bubblewrap, the npm test servers, ...) skip when it is
missing on a developer machine. CI sets ``IPYBOX_TEST_STRICT=1`` so that such a skip fails instead:
there, every component is installed by ``.ci/run`` and a skip would hide a broken setup.

(A plain module, not ``conftest``: test directories have conftest files of their own, and which
one ``import conftest`` finds depends on the collection order.)
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

TESTS_DIR = Path(__file__).parent
NODE_MODULES = TESTS_DIR / "node" / "node_modules"
STRICT = os.environ.get("IPYBOX_TEST_STRICT") == "1"


def require(condition: bool, reason: str) -> None:
    """Skip the calling test unless ``condition`` holds; fail instead in strict (CI) mode."""
    if condition:
        return
    if STRICT:
        pytest.fail(f"missing test prerequisite in strict mode: {reason}")
    pytest.skip(reason)
