"""The example agent runs offline (scripted model, real kernel, real demo MCP server)."""

from __future__ import annotations

from example_runner import run_example

APPROVALS = [
    "approve shop.list_products(category='books') [read-only]? [y/N] y (auto)",
    "approve shop.exchange_rate(currency='EUR') [read-only]? [y/N] y (auto)",
    "approve shop.place_order(product_id='b-101', quantity=1) [destructive]? [y/N] y (auto)",
]
ORDERED = "ordered 'Structure and Interpretation of Computer Programs': ord-1001, 44.16 EUR"


def test_example_runs_offline_with_approvals_in_the_terminal() -> None:
    done = run_example("pydantic_ai_agent.py", "--offline", "--yes")
    lines = done.stdout.splitlines()
    assert [line.strip() for line in lines if "approve " in line] == APPROVALS
    assert "  | Structure and Interpretation of Computer Programs: 44.16 EUR" in lines
    assert f"  | {ORDERED}" in lines
    assert lines[-1] == f"Done. Last result: {ORDERED}"
    assert done.stdout.count("--- the agent runs ---") == 2  # each code shown once, however many rounds
    assert "stdin is not a terminal" not in done.stdout  # --yes approves without that notice
