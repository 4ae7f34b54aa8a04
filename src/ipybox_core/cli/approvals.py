"""``ipybox approvals``: the approvals inbox of an ipybox service (list, approve, reject)."""

from __future__ import annotations

import argparse
import asyncio
import getpass
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ipybox_core.cli._console import Console
from ipybox_core.cli._errors import EXIT_OK, UsageError
from ipybox_core.terminal import terminal_safe

if TYPE_CHECKING:
    from ipybox_core.remote import RemoteSessions, WaitingApproval

DEFAULT_URL = "http://127.0.0.1:8765/mcp"
URL_ENV = "IPYBOX_URL"
TOKEN_ENV = "IPYBOX_MCP_TOKEN"

DESCRIPTION = """\
The approvals inbox of an ipybox service (ipybox serve): what waits for a decision across every
conversation, and answers to it. "list" shows each waiting approval: its id, conversation, server
and tool, arguments, hints (read-only, destructive), who asked (the client name of the worker) and
how long it has waited. "approve ID" and "reject ID" answer one: the service records the decision as
client:<name> in its audit log and the code continues at once in the conversation's kernel; the
conversation gets the outcome when it resumes the call. An approval answered already is refused,
naming who answered it.

The token is IPYBOX_MCP_TOKEN, or the first line of --token-file FILE."""

EPILOG = """\
examples:
  ipybox approvals list
  ipybox approvals list --conversation user-42 --json
  ipybox approvals approve 3f2c9a1e
  ipybox approvals reject 3f2c9a1e --reason "not on a Friday"
  ipybox approvals approve 3f2c9a1e --arguments '{"quantity": 1}'
"""


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--url",
        default=None,
        metavar="URL",
        help=f"the service's MCP endpoint (default: ${URL_ENV} or {DEFAULT_URL})",
    )
    common.add_argument(
        "--token-file", type=Path, metavar="FILE", help=f"read the token from FILE (default: ${TOKEN_ENV})"
    )
    common.add_argument(
        "--client-name",
        metavar="NAME",
        help="the name the audit log records for your decisions, as client:NAME (default: cli-<user>)",
    )
    parser = commands.add_parser(
        "approvals",
        help="list and answer the approvals that wait in an ipybox service",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    listing = actions.add_parser(
        "list", parents=[common], help="list the waiting approvals", description="List the waiting approvals."
    )
    listing.add_argument("--conversation", metavar="KEY", help="only this conversation's")
    listing.add_argument("--json", action="store_true", help="one JSON object per line")
    approve = actions.add_parser(
        "approve", parents=[common], help="approve one (the call runs)", description="Approve a waiting call."
    )
    approve.add_argument("id", help="the approval's id as listed (or its first 8+ characters)")
    approve.add_argument("--arguments", metavar="JSON", help="run the call with these arguments instead")
    reject = actions.add_parser(
        "reject",
        parents=[common],
        help="reject one (the code sees PermissionError)",
        description="Reject a call.",
    )
    reject.add_argument("id", help="the approval's id as listed (or its first 8+ characters)")
    reject.add_argument("--reason", default="rejected from the approvals inbox", help="what the code is told")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace, console: Console) -> int:
    sessions = _sessions(args)
    if args.action == "list":
        listed = asyncio.run(_list(sessions, args.conversation))
        for approval in listed:
            print(json.dumps(_as_json(approval)) if args.json else describe(approval), flush=True)
        if not listed and not args.json:
            console.info("no approvals are waiting")
        return EXIT_OK
    approving = args.action == "approve"
    arguments = _arguments(args.arguments) if approving else None
    reason = None if approving else args.reason
    answered = asyncio.run(_answer(sessions, args.id, approve=approving, reason=reason, arguments=arguments))
    call = f" call {answered.call_id}" if answered.call_id else ""
    asked = f", asked by {answered.asked_by}" if answered.asked_by else ""
    verb = "approved" if approving else "rejected"
    console.info(f"{verb} {answered.name} in {answered.conversation}{call} ({answered.id[:8]}{asked})")
    return EXIT_OK


def describe(approval: WaitingApproval) -> str:
    """One line for a waiting approval: id, conversation, call, who asked, how long ago."""
    hints = f" [{', '.join(approval.hints)}]" if approval.hints else ""
    arguments = json.dumps(approval.arguments, ensure_ascii=False, default=str)
    if len(arguments) > 200:
        arguments = arguments[:197] + "..."
    asked = f"asked by {approval.asked_by}" if approval.asked_by else "asked"
    call = f" call {approval.call_id}" if approval.call_id else ""
    return terminal_safe(
        f"{approval.id}  {approval.conversation}{call}  {approval.name}{hints} {arguments}  "
        f"{asked} {_ago(approval.waiting_for)}"
    )


def _ago(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s ago"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min ago"
    return f"{seconds / 3600:.1f} h ago"


def _as_json(approval: WaitingApproval) -> dict[str, Any]:
    from ipybox_core.protocol import waiting_data

    return waiting_data(approval)


def _sessions(args: argparse.Namespace) -> RemoteSessions:
    from ipybox_core.protocol import plain_name
    from ipybox_core.remote import RemoteSessions

    token = _token(args.token_file)
    name = args.client_name or plain_name(f"cli-{_user()}")
    url = args.url or os.environ.get(URL_ENV) or DEFAULT_URL
    return RemoteSessions(url, token=token, client_name=name, connect_timeout=10.0)


def _token(file: Path | None) -> str | None:
    if file is None:
        return os.environ.get(TOKEN_ENV)
    try:
        lines = file.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as error:
        reason = error.strerror if isinstance(error, OSError) and error.strerror else str(error)
        raise UsageError(f"cannot read the token file {str(file)!r}: {reason}") from None
    token = lines[0].strip() if lines else ""
    if not token:
        raise UsageError(f"the token file {str(file)!r} is empty")
    return token


def _arguments(text: str | None) -> dict[str, Any] | None:
    if text is None:
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        raise UsageError(f"--arguments is not valid JSON: {error}") from None
    if not isinstance(value, dict):
        raise UsageError("--arguments must be a JSON object, e.g. '{\"quantity\": 1}'")
    return value


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return str(os.getuid()) if sys.platform != "win32" else "user"


async def _list(sessions: RemoteSessions, conversation: str | None) -> list[WaitingApproval]:
    async with sessions:
        return await sessions.waiting_approvals(conversation)


async def _answer(
    sessions: RemoteSessions,
    approval_id: str,
    *,
    approve: bool,
    reason: str | None,
    arguments: dict[str, Any] | None,
) -> WaitingApproval:
    async with sessions:
        return await sessions.answer_approval(
            approval_id, approve=approve, reason=reason, arguments=arguments
        )
