"""The ``ipybox`` command."""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="ipybox", description="Code actions with approved MCP tool calls.")
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser(
        "demo", help="run the demo: a bundled MCP server and code whose calls you approve"
    )
    demo.add_argument("--yes", action="store_true", help="approve every tool call without asking")
    args = parser.parse_args(argv)
    if args.command == "demo":
        from ipybox_core.demo import run_demo

        return asyncio.run(run_demo(auto_approve=args.yes))
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
