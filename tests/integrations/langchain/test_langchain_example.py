"""examples/langchain_agent.py runs offline end to end, with one approved MCP call in the agent's code."""

from __future__ import annotations

from example_runner import run_example


def test_offline_example_approves_an_order_placed_by_agent_code() -> None:
    out = run_example("langchain_agent.py", "--offline", "--yes").stdout
    assert "(--yes: approving every call automatically)" in out
    assert "cheapest book: Structure and Interpretation of Computer Programs (44.16 EUR)" in out
    # read-only calls ran without a question; the order was an interrupt, approved, then carried out
    assert out.count("approval needed:") == 1
    assert "shop.place_order [destructive]: place_order(product_id='b-101', quantity=1)" in out
    assert "-> approved (auto)" in out
    assert "ordered: ord-1001, 44.16 EUR" in out
    assert out.rstrip().endswith("Done. ordered: ord-1001, 44.16 EUR")


def test_the_per_call_example_streams_the_output_and_asks_one_tool_approval() -> None:
    out = run_example("langchain_per_call.py").stdout.splitlines()
    assert out[:3] == [
        "live: looking for the cheapest tool...",
        "live: found Digital multimeter",
        "approve? shop.place_order {'product_id': 't-302', 'quantity': 1}",
    ]
    assert out[3] == "live: ordered: ord-1001" and out[-1] == "ordered: ord-1001"
