"""The service examples run and print what docs/deploying.md and the framework pages show.

Each starts ``ipybox serve`` as a real process; the framework examples then run process A (the
agent until its MCP call waits for approval, the framework's state saved, exit) and process B (the
state loaded, the call approved, the code continued in A's kernel) as two more real processes.
"""

from __future__ import annotations

import re

import pytest

from example_runner import DOCS, documented, run_example

pytestmark = pytest.mark.slow

ACROSS_PROCESSES = [
    "process A: shop.place_order waits for approval; exiting",
    "process B: approving shop.place_order",
    "process B: ordered for 48.0 USD (budget 50 USD): ord-1001",  # A's variable, in A's kernel
]


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


@pytest.mark.parametrize(
    ("example", "page"),
    [
        ("langchain_service.py", "frameworks/langchain.md"),
        ("pydantic_ai_service.py", "frameworks/pydantic_ai.md"),
        ("openai_agents_service.py", "frameworks/openai_agents.md"),
    ],
)
def test_process_b_approves_what_process_a_left_and_the_code_goes_on_in_its_kernel(
    example: str, page: str
) -> None:
    out = run_example(example).stdout
    assert out.splitlines() == ACROSS_PROCESSES
    documented(page, *ACROSS_PROCESSES)


def test_inbox_example_lists_both_waiting_calls_and_each_worker_gets_its_answers_outcome() -> None:
    out = run_example("service_inbox.py").stdout
    lines = [
        "worker A: two calls wait for approval",
        "inbox: conversation-1 call-1 shop.place_order {'product_id': 'b-101', 'quantity': 1} asked by worker-a",
        "inbox: conversation-2 call-2 shop.place_order {'product_id': 't-302', 'quantity': 1} asked by worker-a",
        "worker A: conversation-1: ordered for 48.0 USD: ord-1001",
        "worker A: conversation-2: refused: shop.place_order was rejected: over budget",
        "audit log: [('place_order', True, 'client:operator'), ('place_order', False, 'client:operator')]",
    ]
    assert out.splitlines() == lines
    documented("approvals.md", *lines)
