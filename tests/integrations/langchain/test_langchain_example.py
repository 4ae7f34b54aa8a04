"""examples/langchain_agent.py runs offline end to end, with one approved MCP call in the agent's code."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

EXAMPLE = Path(__file__).parents[3] / "examples" / "langchain_agent.py"


def test_offline_example_approves_an_order_placed_by_agent_code() -> None:
    env = {key: value for key, value in os.environ.items() if key != "OPENAI_API_KEY"}
    run = subprocess.run(
        [sys.executable, str(EXAMPLE), "--offline", "--yes"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    out = run.stdout
    assert "(--yes: approving every call automatically)" in out
    assert "cheapest book: Structure and Interpretation of Computer Programs (44.16 EUR)" in out
    # read-only calls ran without a question; the order was an interrupt, approved, then carried out
    assert out.count("approval needed:") == 1
    assert "shop.place_order [destructive]: place_order(product_id='b-101', quantity=1)" in out
    assert "-> approved (auto)" in out
    assert "ordered: ord-1001, 44.16 EUR" in out
    assert out.rstrip().endswith("Done. ordered: ord-1001, 44.16 EUR")
