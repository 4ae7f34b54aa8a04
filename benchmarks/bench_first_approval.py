"""The first approval of a process: "approve -> next event" in a fresh process against a warm one.

Run: ``.venv/bin/python benchmarks/bench_first_approval.py [--repeat 5]``. Every figure is measured
in this run.

An approval flow resumes in whichever process gets the human's answer, often a fresh one (a web
worker, a restarted app). What the human waits for after approving is the time from the approval
to the code's next event: the MCP call runs, its structured result is validated on the host, the
kernel goes on to the next held call. Work a process does once (imports on the first structured
result, first connection use) lands there.

Each repetition starts a fresh Python process with one executor and the test MCP server. The code
makes a structured call (``stats``, with an output schema) then another held call (``add``). The
process approves the first and measures the time until the second ``ApprovalRequest`` arrives: the
*fresh* figure. It then runs the same code three more times in the same process: the median is the
*warm* figure. Reported:
the median of each and their ratio (goal: fresh <= 1.5x warm).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent.parent / "tests"))
from servers import PYTHON, SERVE_SCRIPT

#: Arguments for a seconds-long run that only checks the benchmark still works (tests/test_benchmarks.py).
TINY_ARGS = ["--repeat", "1"]

CODE = """\
from mcptools.test import add, stats
summary = stats(values=[1.0, 2.0, 4.0])
print(summary, add(a=1, b=2))
"""


WARM_RUNS = 3


async def approve_to_next_event() -> list[float]:
    """In this process: seconds from approving the structured call to the next held call, for the
    process's first run of the code, then for each of ``WARM_RUNS`` more."""
    from ipybox_core.approval import ApprovalRequest
    from ipybox_core.executor import CodeExecutor

    with tempfile.TemporaryDirectory(prefix="ipybox-bench-") as workspace:
        async with CodeExecutor(workspace=workspace) as executor:
            await executor.register_mcp_server(
                "test", {"command": PYTHON, "args": [str(SERVE_SCRIPT), "stdio"]}
            )
            figures = []
            for _ in range(1 + WARM_RUNS):  # fresh, then warm
                approved_at: float | None = None
                async for event in executor.stream(CODE):
                    if isinstance(event, ApprovalRequest):
                        if event.tool == "stats":
                            approved_at = time.perf_counter()
                        elif approved_at is not None:
                            figures.append(time.perf_counter() - approved_at)
                        await event.accept()
            return figures


def child() -> None:
    fresh, *warm = asyncio.run(approve_to_next_event())
    print(json.dumps({"fresh": fresh, "warm": statistics.median(warm)}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="fresh processes to measure")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child()
        return
    runs = []
    for _ in range(args.repeat):
        done = subprocess.run(
            [sys.executable, __file__, "--child"], capture_output=True, text=True, check=True, timeout=300
        )
        runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
    fresh = statistics.median(run["fresh"] for run in runs)
    warm = statistics.median(run["warm"] for run in runs)
    print(f"approve -> next event, {args.repeat} fresh processes (median)")
    print(f"  fresh process: {fresh * 1000:8.1f} ms")
    print(f"  warm process:  {warm * 1000:8.1f} ms")
    print(f"  ratio:         {fresh / warm:8.2f}x (goal <= 1.5x)")


if __name__ == "__main__":
    main()
