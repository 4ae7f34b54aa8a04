"""``ipybox mcp``: serve ipybox to MCP clients (Claude Code, Claude Desktop, Cursor, ...)."""

from __future__ import annotations

import argparse
import asyncio
import math
import os
from pathlib import Path
from typing import TYPE_CHECKING

from ipybox_core.cli._console import Console
from ipybox_core.cli._errors import EXIT_OK
from ipybox_core.cli._options import add_executor_options, check_paths, positive_float, sandbox_setting

if TYPE_CHECKING:
    from ipybox_core.mcp_server.service import IpyboxService

DESCRIPTION = """\
Serve ipybox as an MCP server. Tools: execute_code, register_mcp_server, list_mcp_servers,
api_reference, install_package, cancel_waiting, reset (ipybox serve adds list_approvals and
answer_approval: the approvals inbox). Every MCP call the executed code makes is approved by the
user through MCP elicitation (the client shows the server, tool and arguments); use --yes to
approve them automatically. The kernel starts in the background while the client connects.

Over Streamable HTTP each MCP session gets its own kernel, working directory and registered
servers (clients that name no session share a default one, with its own directory too; each
directory lies in WORKSPACE/.ipybox-sessions/, which no kernel sees), and every request must
carry a bearer token: "Authorization: Bearer <token>". The token
is IPYBOX_MCP_TOKEN when that environment variable is set, otherwise a new one generated at each
start and printed on stderr. --no-auth turns authentication off, on a loopback host only."""

EPILOG = """\
examples:
  ipybox mcp --workspace . --config mcp.json
  ipybox mcp --sandbox --transport streamable-http --port 8765
  IPYBOX_MCP_TOKEN=$(cat token) ipybox mcp --transport streamable-http --host 0.0.0.0
  claude mcp add ipybox -- uvx --from /path/to/ipybox-checkout ipybox mcp --workspace .
"""


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "mcp",
        help="serve ipybox as an MCP server (stdio or Streamable HTTP)",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--transport", choices=["stdio", "streamable-http"], default="stdio", help="default: stdio"
    )
    add_server_options(parser, port=8000, approval_timeout=600.0)
    parser.set_defaults(handler=run)


def add_server_options(parser: argparse.ArgumentParser, *, port: int, approval_timeout: float) -> None:
    """The options ``ipybox mcp`` and ``ipybox serve`` share."""
    add_executor_options(
        parser,
        workspace_help="stdio: the kernel's working directory (the generated API goes to DIR/mcptools); "
        "Streamable HTTP: the service's directory, each session working in its own directory under "
        "DIR/.ipybox-sessions/",
    )
    parser.add_argument(
        "--api-dir",
        type=Path,
        default=None,
        metavar="DIR",
        help="write the generated API here instead (its name is the package to import from), e.g. "
        "--api-dir ~/.cache/ipybox/mcptools to keep it out of the project",
    )
    parser.add_argument("--host", default="127.0.0.1", help="Streamable HTTP host (default: 127.0.0.1)")
    parser.add_argument(
        "--port", type=int, default=port, help=f"Streamable HTTP port (default: {port}; 0 picks a free port)"
    )
    parser.add_argument(
        "--no-auth",
        action="store_true",
        help="Streamable HTTP without a token (only on a loopback host; any local user can then run code)",
    )
    parser.add_argument(
        "--max-sessions",
        type=int,
        default=100,
        metavar="N",
        help="Streamable HTTP: the most MCP sessions with a kernel at once (default: 100)",
    )
    parser.add_argument(
        "--idle-timeout",
        type=positive_float,
        default=900.0,
        metavar="SECONDS",
        help="Streamable HTTP: stop the kernel of a session idle this long (default: 900)",
    )
    parser.add_argument(
        "--header-timeout",
        type=_finite_seconds,
        default=10.0,
        metavar="SECONDS",
        help="Streamable HTTP: close a connection that has not sent its request headers (and TLS "
        "handshake) this long after connecting or after its last response (default: 10)",
    )
    parser.add_argument(
        "--warm-sessions",
        type=int,
        default=1,
        metavar="N",
        help="Streamable HTTP: kernels kept started for new sessions (default: 1; 0: none)",
    )
    parser.add_argument(
        "--kernel-gateway",
        metavar="URL",
        help="run the kernels on this Jupyter Kernel / Enterprise Gateway (token: IPYBOX_GATEWAY_TOKEN)",
    )
    parser.add_argument(
        "--approval-rules",
        type=Path,
        default=None,
        metavar="FILE",
        help="decide MCP calls by rules instead of asking for each: a TOML or JSON file with allow, "
        'deny (globs over "server.tool"), allow_read_only and default (ask|allow|deny); see '
        "docs/approvals.md",
    )
    parser.add_argument(
        "--require-servers",
        action="store_true",
        help="exit (code 3) when an MCP server of --config cannot start, instead of serving without it",
    )
    parser.add_argument(
        "--audit-log",
        type=Path,
        default=None,
        metavar="FILE",
        help="append every approval decision, and who made it, to this JSON-lines file",
    )
    parser.add_argument(
        "--timeout",
        type=positive_float,
        default=120.0,
        metavar="SECONDS",
        help="default execute_code timeout (default: 120; time waiting for approval does not count)",
    )
    parser.add_argument(
        "--output-limit",
        type=int,
        default=30_000,
        metavar="CHARS",
        help="default maximum characters of execute_code output returned (default: 30000)",
    )
    parser.add_argument(
        "--approval-timeout",
        type=positive_float,
        default=approval_timeout,
        metavar="SECONDS",
        help=f"reject an MCP call whose approval is not answered in time (default: {approval_timeout:g})",
    )
    parser.add_argument(
        "--install-timeout",
        type=positive_float,
        default=300.0,
        metavar="SECONDS",
        help="how long install_package may take (default: 300)",
    )
    parser.add_argument(
        "--pip-arg",
        action="append",
        default=[],
        metavar="ARG",
        help="extra option for every pip install, e.g. --pip-arg=--index-url=URL (repeatable)",
    )


def _finite_seconds(text: str) -> float:
    value = positive_float(text)
    if math.isinf(value):
        raise argparse.ArgumentTypeError(f"must be a finite number of seconds: {text!r}")
    return value


def run(args: argparse.Namespace, console: Console) -> int:
    from ipybox_core.approval.rules_file import load_rules
    from ipybox_core.mcp_server.service import IpyboxService
    from ipybox_core.mcp_server.settings import GATEWAY_TOKEN_ENV, McpServerSettings

    check_paths(args)
    rules = load_rules(args.approval_rules) if args.approval_rules is not None else None
    settings = McpServerSettings(
        workspace=args.workspace,
        api_dir=args.api_dir,
        sandbox=sandbox_setting(args),
        config=args.config,
        env_file=args.env_file,
        auto_approve=args.yes,
        timeout=args.timeout,
        output_limit=args.output_limit,
        approval_timeout=args.approval_timeout,
        install_timeout=args.install_timeout,
        pip_args=tuple(args.pip_arg),
        max_sessions=args.max_sessions,
        idle_timeout=args.idle_timeout,
        header_timeout=args.header_timeout,
        warm_sessions=args.warm_sessions,
        audit_log=args.audit_log,
        approval_rules=rules,
        require_servers=args.require_servers,
        kernel_gateway=args.kernel_gateway,
        gateway_token=os.environ.get(GATEWAY_TOKEN_ENV),
    )
    service = IpyboxService(settings, notify=console.warn)
    asyncio.run(_serve(service, args, console))
    return EXIT_OK


async def _serve(service: IpyboxService, args: argparse.Namespace, console: Console) -> None:
    from ipybox_core.mcp_server.server import serve

    def listening(url: str) -> None:
        console.info(f"ipybox MCP server listening on {url}")

    await serve(
        service,
        transport=args.transport,
        host=args.host,
        port=args.port,
        no_auth=args.no_auth,
        tls=getattr(args, "tls", None),
        on_listening=listening,
        on_token=console.info,
        inbox_tools=args.command == "serve",
    )
