"""examples/service.py runs and prints what docs/deploying.md shows."""

from __future__ import annotations

import re

import pytest

from example_runner import DOCS, run_example

pytestmark = pytest.mark.slow


def test_service_example_answers_worker_as_approval_from_worker_b() -> None:
    out = run_example("service.py").stdout
    ids = re.findall(r"\(([0-9a-f]{8})\)", out)
    assert len(ids) == 2 and ids[0] == ids[1], out  # worker B answered worker A's request
    lines = [re.sub(r"\([0-9a-f]{8}\)", "(1374b3d3)", line) for line in out.splitlines()]
    assert lines == [
        "worker A: shop.place_order waits for approval (1374b3d3); worker A exits",
        "worker B: found shop.place_order (1374b3d3), approving",
        "worker B: ordered for 48.0 USD (budget 50 USD): ord-1001",
        "audit log: [('place_order', True, 'client:worker-b')]",
    ]
    page = (DOCS / "deploying.md").read_text(encoding="utf-8")
    for line in lines:
        assert line in page, f"docs/deploying.md does not show {line!r}"
