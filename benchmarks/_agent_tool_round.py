"""What the tool-call benchmarks share: the test MCP server, the kernel cell of one round, and the
command line and report around them.

:func:`kernel_round` times each given function ``calls`` times in the kernel and prints the seconds
per call as JSON, keyed like the functions. :data:`KERNEL_ROUND` is the agent-tool benchmarks' round:
``add`` (an agent tool the adapter lets through), ``add_ruled`` (one the executor's rule lets
through) and the test server's ``add`` (MCP, by rule).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent.parent / "tests"))
from servers import PYTHON, SERVE_SCRIPT

SERVER = {"command": PYTHON, "args": [str(SERVE_SCRIPT), "stdio"], "env": {"PYTHONUNBUFFERED": "1"}}
#: Arguments for a seconds-long run that only checks a benchmark still works (tests/test_benchmarks.py).
TINY_ARGS = ["--calls", "2", "--rounds", "1"]


def kernel_round(**functions: str) -> str:
    """The cell (with a ``{calls}`` field) timing each ``label="module.function"``."""
    imports = "\n".join(
        f"from {path.rsplit('.', 1)[0]} import {path.rsplit('.', 1)[1]} as _{label}"
        for label, path in functions.items()
    )
    timed = ", ".join(f'"{label}": _per_call(_{label})' for label in functions)
    return f"""\
import json, time
{imports}

def _per_call(function, calls={{calls}}):
    function(a=0, b=0)
    started = time.perf_counter()
    for i in range(calls):
        function(a=i, b=1)
    return (time.perf_counter() - started) / calls

print(json.dumps({{{{{timed}}}}}))
"""


KERNEL_ROUND = kernel_round(asked="agent_tools.add", ruled="agent_tools.add_ruled", mcp="mcptools.bench.add")


def arguments(description: str | None, *, calls: int) -> argparse.Namespace:
    """``--calls`` (default ``calls``) and ``--rounds`` (default 5)."""
    parser = argparse.ArgumentParser(
        description=description, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--calls", type=int, default=calls, help="calls per variant and round")
    parser.add_argument("--rounds", type=int, default=5, help="rounds (variants interleaved)")
    return parser.parse_args()


def report(
    samples: dict[str, list[float]], labels: dict[str, str], calls: int, rounds: int
) -> dict[str, float]:
    """Print each variant's median per call and its rounds' range; returns the medians."""
    median = {name: statistics.median(values) for name, values in samples.items()}
    print(f"{calls} calls x {rounds} rounds, medians per call:")
    for name, label in labels.items():
        low, high = min(samples[name]) * 1e3, max(samples[name]) * 1e3
        print(f"  {label:22} {median[name] * 1e3:8.3f} ms  (rounds {low:.3f}-{high:.3f})")
    return median
