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
the median of each and their ratio (goal: fresh <= 1.5x warm). Also reported, the same for the
second approval (``add`` approved -> the line the code prints next): work moved from after an
approval to before the next request would show up there.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
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


async def approve_to_next_event() -> list[tuple[float, float]]:
    """In this process, for the process's first run of the code, then for each of ``WARM_RUNS``
    more: seconds from approving the structured call to the next held call, and from approving
    that one to the code's printed line (the ``ToolCall`` outcome events in between are not
    waited for)."""
    from ipybox_core.approval import ApprovalRequest
    from ipybox_core.executor import CodeExecutor, OutputChunk

    with tempfile.TemporaryDirectory(prefix="ipybox-bench-") as workspace:
        async with CodeExecutor(workspace=workspace) as executor:
            await executor.register_mcp_server(
                "test", {"command": PYTHON, "args": [str(SERVE_SCRIPT), "stdio"]}
            )
            figures = []
            for _ in range(1 + WARM_RUNS):  # fresh, then warm
                approved: dict[str, float] = {}
                waits: dict[str, float] = {}
                async for event in executor.stream(CODE):
                    now = time.perf_counter()
                    if isinstance(event, OutputChunk) and "add" in approved and "add" not in waits:
                        waits["add"] = now - approved["add"]
                    if isinstance(event, ApprovalRequest):
                        if event.tool == "add" and "stats" in approved:
                            waits["stats"] = now - approved["stats"]
                        approved[event.tool] = time.perf_counter()
                        await event.accept()
                figures.append((waits["stats"], waits["add"]))
            return figures


def child() -> None:
    (fresh, fresh_second), *warm = asyncio.run(approve_to_next_event())
    print(
        json.dumps(
            {
                "fresh": fresh,
                "warm": statistics.median(first for first, _ in warm),
                "fresh_second": fresh_second,
                "warm_second": statistics.median(second for _, second in warm),
            }
        )
    )


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
    load = os.getloadavg()[0]
    print(f"approve -> next event, {args.repeat} fresh processes (median; load average {load:.2f})")
    for label, key, goal in (("first approval", "", " (goal <= 1.5x)"), ("second approval", "_second", "")):
        fresh = statistics.median(run["fresh" + key] for run in runs)
        warm = statistics.median(run["warm" + key] for run in runs)
        print(f"  {label}")
        print(f"    fresh process: {fresh * 1000:8.1f} ms")
        print(f"    warm process:  {warm * 1000:8.1f} ms")
        print(f"    ratio:         {fresh / warm:8.2f}x{goal}")


if __name__ == "__main__":
    main()
