"""``ipybox serve``: the ipybox service that application processes share (approvals outlive them)."""

from __future__ import annotations

import argparse
from pathlib import Path

from ipybox_core.cli import mcp
from ipybox_core.cli._console import Console

DESCRIPTION = """\
Run ipybox as a long-lived service: it owns the kernels (one per conversation key), the MCP servers
and their credentials, and every approval that waits for a human. Application processes use it
through ipybox_core.remote.RemoteSessions (the framework adapters take it where they take
Sessions); a pending approval can be answered from any process, even after the one that started
the code was restarted, and the code continues in the same kernel.

It is the ipybox MCP server over Streamable HTTP (protocol 2026-07-28, approvals as input-required
rounds), so any MCP client can use it too. Every request must carry the bearer token
(IPYBOX_MCP_TOKEN, or one generated and printed at start); --no-auth only on loopback. Each
conversation works in its own directory under WORKSPACE/.ipybox-sessions/ (no kernel sees
WORKSPACE itself); as root with --sandbox each conversation's kernel runs as its own uid.

Every MCP call of the code comes back to the application as an approval, unless --approval-rules
FILE decides it (TOML or JSON: allow, deny, allow_read_only, default; see docs/approvals.md) or
--yes approves all. GET /healthz (live) and GET /readyz (kernels started and every --config server
connected; 503 otherwise) answer without the token. A --config server that cannot start is left
out (readiness says so, the code is told "MCP server 'NAME' is not available: ..."); with
--require-servers the service exits instead. What waits for approval, in every conversation, is
listed and answered with "ipybox approvals" (the approvals inbox). See docs/deploying.md."""

EPILOG = """\
examples:
  ipybox serve --config mcp.json --workspace ./ipybox-service --approval-rules rules.toml
  IPYBOX_MCP_TOKEN=$(cat /etc/ipybox/token) ipybox serve --sandbox --host 0.0.0.0 \\
      --tls-cert /etc/ipybox/cert.pem --tls-key /etc/ipybox/key.pem
"""


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "serve",
        help="run ipybox as a service shared by application processes (approvals outlive them)",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    mcp.add_server_options(parser, port=8765, approval_timeout=86_400.0)
    parser.add_argument(
        "--tls-cert", type=Path, metavar="PEM", help="serve HTTPS with this certificate chain"
    )
    parser.add_argument("--tls-key", type=Path, metavar="PEM", help="the certificate's private key")
    parser.set_defaults(handler=run, transport="streamable-http")


def run(args: argparse.Namespace, console: Console) -> int:
    from ipybox_core.errors import ConfigError
    from ipybox_core.mcp_server.server import Tls

    if (args.tls_cert is None) != (args.tls_key is None):
        raise ConfigError("--tls-cert and --tls-key go together: give both, or neither")
    args.tls = Tls(args.tls_cert, args.tls_key) if args.tls_cert is not None else None
    return mcp.run(args, console)
