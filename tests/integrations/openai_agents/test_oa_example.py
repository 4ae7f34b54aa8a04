"""The example runs offline end to end, approving the MCP call its code makes."""

from __future__ import annotations

from example_runner import run_example


def test_example_runs_offline_with_auto_approval() -> None:
    out = run_example("openai_agents_agent.py", "--offline", "--yes").stdout
    assert "  | b-101  Structure and Interpretation of Computer Prog" in out  # read-only calls ran unasked
    assert "approve shop.place_order(product_id='b-101', quantity=1) [destructive]? [y/N] y (auto)" in out
    assert "  | ordered 'Structure and Interpretation of Computer Programs': ord-1001" in out
    assert out.count("approve ") == 1
    assert out.rstrip().endswith(
        "ordered 'Structure and Interpretation of Computer Programs': ord-1001, 44.16 EUR"
    )
