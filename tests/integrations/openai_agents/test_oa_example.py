"""The example runs offline end to end, approving the MCP call its code makes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

EXAMPLE = Path(__file__).parents[3] / "examples" / "openai_agents_agent.py"


def test_example_runs_offline_with_auto_approval() -> None:
    env = {key: value for key, value in os.environ.items() if key != "OPENAI_API_KEY"}
    completed = subprocess.run(
        [sys.executable, str(EXAMPLE), "--offline", "--yes"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        stdin=subprocess.DEVNULL,
    )
    out = completed.stdout
    assert completed.returncode == 0, completed.stderr
    assert "  | b-101  Structure and Interpretation of Computer Prog" in out  # read-only calls ran unasked
    assert "approve? The code calls MCP tool shop.place_order [destructive]: " in out
    assert "place_order(product_id='b-101', quantity=1) [y/N] y (auto)" in out
    assert "  | ordered 'Structure and Interpretation of Computer Programs': ord-1001" in out
    assert out.count("approve?") == 1
    assert out.rstrip().endswith(
        "ordered 'Structure and Interpretation of Computer Programs': ord-1001, 44.16 EUR"
    )
