"""The ``ipybox`` command: ``run``, ``gen``, ``mcp``, ``serve``, ``approvals`` and ``demo``.

Subcommands import their (heavy) dependencies only when they run, so ``ipybox --help`` and the
start of ``ipybox mcp`` stay fast. Errors caused by the user (a missing file, an invalid config, an
unreachable MCP server) are one-line messages on stderr with a distinct exit code, never tracebacks.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence

from ipybox_core.cli import approvals, gen, mcp, run, serve
from ipybox_core.cli._console import Console
from ipybox_core.cli._errors import EXIT_USAGE, report

DESCRIPTION = """\
ipybox: code actions with approved MCP tool calls. Code runs in a stateful IPython kernel
(optionally sandboxed) and calls MCP tools through a typed Python API generated from their
schemas; every MCP call waits for approval."""

EPILOG = """\
commands:
  ipybox demo                          see a code action with MCP calls you approve
  ipybox run FILE.py|-                 execute code, approving its MCP calls in the terminal
  ipybox gen NAME -- CMD ARGS...       generate a server's Python API and print its signatures
  ipybox mcp                           serve ipybox to MCP clients (Claude Code, Cursor, ...)
  ipybox serve                         run ipybox as a service that application processes share
  ipybox approvals ACTION              list, approve or reject what waits in an ipybox service

"ipybox COMMAND --help" explains each command."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ipybox",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    demo = commands.add_parser(
        "demo",
        help="run the demo: a bundled MCP server and code whose calls you approve",
        description="Run two code actions against a bundled demo MCP server (a shop); you approve "
        "each MCP call in the terminal.",
    )
    demo.add_argument("--yes", "-y", action="store_true", help="approve every tool call without asking")
    demo.set_defaults(handler=_demo)
    run.add_parser(commands)
    gen.add_parser(commands)
    mcp.add_parser(commands)
    serve.add_parser(commands)
    approvals.add_parser(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``ipybox`` command; returns the process exit code."""
    parser = build_parser()
    arguments, server_command = _split_server_command(list(sys.argv[1:] if argv is None else argv))
    try:
        args, unknown = parser.parse_known_args(arguments)
        if unknown:  # reported with the usage of the subcommand they were given to
            _subcommand(parser, args.command).error(f"unrecognized arguments: {' '.join(unknown)}")
        if server_command is not None:
            if args.command != "gen":
                parser.error('"-- CMD ARGS..." is only for "ipybox gen"')
            args.server_command = [*args.server_command, *server_command]
    except SystemExit as exit_:  # --help, --version, or a usage error argparse has reported
        return exit_.code if isinstance(exit_.code, int) else EXIT_USAGE
    console = Console(quiet=getattr(args, "quiet", False))
    try:
        code: int = args.handler(args, console)
    except BaseException as error:
        if isinstance(error, SystemExit):
            raise
        return report(error, console)
    return code


def _subcommand(parser: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            found: argparse.ArgumentParser = action.choices[name]
            return found
    return parser


def _split_server_command(argv: list[str]) -> tuple[list[str], list[str] | None]:
    """``gen NAME [options] -- CMD ARGS``: everything after the first ``--`` is the server command
    (argparse alone cannot take options between a name and ``--``)."""
    if "--" not in argv:
        return argv, None
    index = argv.index("--")
    return argv[:index], argv[index + 1 :]


def _demo(args: argparse.Namespace, console: Console) -> int:
    from ipybox_core.demo import run_demo

    return asyncio.run(run_demo(auto_approve=args.yes))


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("ipybox")
    except PackageNotFoundError:
        return "unknown"


if __name__ == "__main__":
    raise SystemExit(main())
