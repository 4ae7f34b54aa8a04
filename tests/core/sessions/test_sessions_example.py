"""examples/sessions.py runs and prints what docs/serving.md shows."""

from __future__ import annotations

import pytest

from example_runner import DOCS, run_example

pytestmark = pytest.mark.slow


def test_sessions_example_keeps_conversations_apart_and_reports_the_restart() -> None:
    out = run_example("sessions.py").stdout
    lines = [
        "alice: ['Structure and Interpretation of Computer Programs']",
        "bob: []",
        "notice: the Python kernel of this conversation was restarted (it was closed by the application): "
        "variables and imports from earlier code are gone (files in the workspace remain)",
        "bob: False",
    ]
    assert out.splitlines() == lines
    page = (DOCS / "serving.md").read_text(encoding="utf-8")
    for line in lines:
        assert line in page, f"docs/serving.md does not show {line!r}"
