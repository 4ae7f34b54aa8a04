"""``ipybox gen NAME -- CMD ARGS...`` / ``ipybox gen NAME --url URL``: generate an MCP server's
typed Python API into a directory and print its signatures."""

from __future__ import annotations

import argparse
import asyncio
import sys
import warnings
from pathlib import Path
from typing import Any

from ipybox_core.cli._console import Console
from ipybox_core.cli._errors import EXIT_OK, UsageError
from ipybox_core.cli._options import positive_float

DESCRIPTION = """\
Connect to an MCP server, generate its typed Python API into OUT/<name>/ (importable as
`from <OUT-name>.<name> import <tool>` with OUT's parent on sys.path) and print the signatures.
Give the server as a command after "--" (stdio), with --url (Streamable HTTP, or SSE for URLs
ending in /sse), or by name from an mcpServers --config file."""

EPILOG = """\
examples:
  ipybox gen fetch -- uvx mcp-server-fetch
  ipybox gen github --url https://api.githubcopilot.com/mcp/ --header 'Authorization=Bearer ${GITHUB_TOKEN}'
  ipybox gen everything --config mcp.json --out ./mcptools
"""


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "gen",
        help="generate the typed Python API of an MCP server and print its signatures",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("name", help="the server's name (the Python package is named after it)")
    parser.add_argument(
        "server_command", nargs="*", metavar="-- CMD ARGS", help="launch a stdio server with this command"
    )
    parser.add_argument("--url", help="a Streamable HTTP (or SSE, path ending in /sse) server")
    parser.add_argument("--sse", action="store_true", help="the URL is a legacy HTTP+SSE endpoint")
    parser.add_argument(
        "--header", action="append", default=[], metavar="NAME=VALUE", help="an HTTP header (repeatable)"
    )
    parser.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="environment of a stdio server (repeatable)",
    )
    parser.add_argument(
        "--config", "-c", type=Path, metavar="FILE", help="take server NAME from an mcpServers file"
    )
    parser.add_argument(
        "--out", "-o", type=Path, default=Path("mcptools"), metavar="DIR", help="default: ./mcptools"
    )
    parser.add_argument(
        "--env-file",
        type=Path,
        metavar="FILE",
        help="values for ${VAR} placeholders (default: ./.env if present)",
    )
    parser.add_argument(
        "--connect-timeout", type=positive_float, default=30.0, metavar="SECONDS", help="default: 30"
    )
    parser.add_argument("--quiet", "-q", action="store_true", help="no progress messages")
    parser.set_defaults(handler=run)


def server_config(args: argparse.Namespace) -> dict[str, Any] | None:
    """The raw server config the options describe; ``None`` when it comes from ``--config``."""
    given = [bool(args.server_command), args.url is not None, args.config is not None]
    if sum(given) != 1:
        raise UsageError('give the server as "-- CMD ARGS...", with --url URL, or with --config FILE')
    if args.config is not None:
        if not args.config.is_file():
            raise UsageError(f"MCP config file {str(args.config)!r} does not exist")
        return None
    if args.url is not None:
        config: dict[str, Any] = {"url": args.url, "headers": _pairs(args.header, "--header")}
        if args.sse:
            config["transport"] = "sse"
        if args.env:
            raise UsageError("--env is for stdio servers; use --header for HTTP servers")
        return config
    if args.header or args.sse:
        raise UsageError("--header and --sse are for --url servers")
    command, *arguments = args.server_command
    return {"command": command, "args": arguments, "env": _pairs(args.env, "--env")}


def run(args: argparse.Namespace, console: Console) -> int:
    config = server_config(args)
    return asyncio.run(_generate(args, config, console))


async def _generate(args: argparse.Namespace, config: dict[str, Any] | None, console: Console) -> int:
    from ipybox_core.codegen import api_reference, generate_server_package
    from ipybox_core.mcp import McpRegistry, load_mcp_config, parse_server_config
    from ipybox_core.mcp_server.environment import load_environment

    env = load_environment(args.env_file or Path(".env"))
    if config is None:
        servers = load_mcp_config(args.config, environ=env.mcp_env)
        if args.name not in servers:
            known = ", ".join(servers) or "none"
            raise UsageError(f"{str(args.config)!r} has no (enabled) server {args.name!r} (servers: {known})")
        parsed = servers[args.name]
    else:
        parsed = parse_server_config(args.name, config, environ=env.mcp_env)
    console.progress(f"connecting to {args.name!r} ({parsed.describe()})")
    async with McpRegistry(connect_timeout=args.connect_timeout, environ=env.mcp_env) as registry:
        tools = await registry.add(args.name, parsed)
    console.progress(f"generating the Python API of {len(tools)} tools into {args.out}")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        package = await asyncio.to_thread(generate_server_package, args.name, tools, args.out)
    for warning in caught:
        console.warn(str(warning.message))
    sys.stdout.write(api_reference([package], package=args.out.resolve().name))
    sys.stdout.flush()
    console.info(console.style(f"wrote {package.path}", "green"))
    return EXIT_OK


def _pairs(items: list[str], option: str) -> dict[str, str]:
    pairs: dict[str, str] = {}
    for item in items:
        name, separator, value = item.partition("=")
        if not separator or not name:
            raise UsageError(f"{option} expects NAME=VALUE, got {item!r}")
        pairs[name] = value
    return pairs
