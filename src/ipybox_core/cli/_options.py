"""Options shared by ``ipybox run`` and ``ipybox mcp``."""

from __future__ import annotations

import argparse
from pathlib import Path

from ipybox_core.cli._errors import UsageError


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be greater than 0: {text!r}")
    return value


def add_executor_options(parser: argparse.ArgumentParser, *, workspace_help: str) -> None:
    parser.add_argument("--workspace", "-w", type=Path, default=Path("."), metavar="DIR", help=workspace_help)
    parser.add_argument(
        "--config",
        "-c",
        type=Path,
        metavar="FILE",
        help='MCP servers to register at start: a JSON file with {"mcpServers": {...}} '
        "(the format of Claude Desktop, Claude Code and Cursor)",
    )
    parser.add_argument(
        "--sandbox", action="store_true", help="run the kernel in the OS sandbox (bubblewrap on Linux)"
    )
    parser.add_argument(
        "--sandbox-config", type=Path, metavar="FILE", help="run the kernel in the sandbox configured in FILE"
    )
    parser.add_argument(
        "--env-file",
        type=Path,
        metavar="FILE",
        help="secrets for ${VAR} in MCP configs (default: WORKSPACE/.env); the kernel only gets "
        "variables named KERNEL_ENV_<NAME>, as <NAME>",
    )
    parser.add_argument(
        "--yes", "-y", action="store_true", help="approve every MCP call of the code without asking"
    )


def sandbox_setting(args: argparse.Namespace) -> bool | Path:
    """``--sandbox-config FILE`` (which implies ``--sandbox``), ``--sandbox``, or no sandbox."""
    if args.sandbox_config is not None:
        if not args.sandbox_config.is_file():
            raise UsageError(f"sandbox config file {str(args.sandbox_config)!r} does not exist")
        from ipybox_core.sandbox import SandboxPolicy

        SandboxPolicy.from_file(args.sandbox_config)  # a mistake in it is reported before anything starts
        return Path(args.sandbox_config)
    return bool(args.sandbox)


def check_paths(args: argparse.Namespace) -> None:
    """Fail early, with a short message, on a missing config file or a workspace that is a file."""
    if args.config is not None and not args.config.is_file():
        raise UsageError(f"MCP config file {str(args.config)!r} does not exist")
    if args.workspace.exists() and not args.workspace.is_dir():
        raise UsageError(f"workspace {str(args.workspace)!r} is not a directory")
    if args.env_file is not None and not args.env_file.is_file():
        raise UsageError(f"env file {str(args.env_file)!r} does not exist")
