"""Log notifications (``notifications/message``) to the MCP client, at the level it set.

``logging/setLevel`` (protocol up to 2025-11-25) sets the lowest level a client session is sent;
the level is kept on the session's connection and goes with it. Until a client sets one it gets
:data:`DEFAULT_LEVEL` and above. A 2026-07-28 client has no ``logging/setLevel``: it opts in per
request (``_meta["io.modelcontextprotocol/logLevel"]``), which the MCP SDK applies.

What ipybox sends (logger ``ipybox``): when ``register_mcp_server`` registers a server, ``info``
with its module and number of tools, and a ``warning`` for each tool whose schema could not be
fully typed (the notes that otherwise reach only the server's stderr).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final, get_args

from mcp_types import EmptyResult, LoggingLevel, SetLevelRequestParams
from mcp_types.version import is_version_at_least

from ipybox_core.mcp_server.approvals import INPUT_REQUIRED_VERSION

if TYPE_CHECKING:
    from mcp.server import MCPServer
    from mcp.server.context import ServerRequestContext
    from mcp.server.mcpserver import Context
    from mcp.server.session import ServerSession

    from ipybox_core.executor import RegisteredServer

LEVELS: Final[tuple[LoggingLevel, ...]] = get_args(LoggingLevel)
"""The levels, least severe first (``debug`` ... ``emergency``)."""
DEFAULT_LEVEL: Final[LoggingLevel] = "warning"
"""The lowest level sent to a client session that has not set one."""
LOGGER: Final = "ipybox"
_LEVEL_KEY: Final = "ipybox.dev/log_level"
"""Where a connection's level is kept in its ``Connection.state``."""


def add_set_level(server: MCPServer[Any]) -> None:
    """Answer ``logging/setLevel`` on ``server`` (which then announces the logging capability)."""

    async def set_level(ctx: ServerRequestContext[Any], params: SetLevelRequestParams) -> EmptyResult:
        _state(ctx.session)[_LEVEL_KEY] = params.level
        return EmptyResult()

    # MCPServer has no public hook for it; its low-level server's handler table is the SDK's way
    server._lowlevel_server.add_request_handler("logging/setLevel", SetLevelRequestParams, set_level)


def level_of(ctx: Context[Any, Any]) -> LoggingLevel | None:
    """The lowest level ``ctx``'s client session is sent; ``None``: every level (a 2026-07-28
    request, whose own opt-in the SDK checks)."""
    level = _state(ctx.request_context.session).get(_LEVEL_KEY)
    if level in LEVELS:
        return level  # type: ignore[no-any-return]
    version = ctx.protocol_version
    if version is not None and is_version_at_least(version, INPUT_REQUIRED_VERSION):
        return None
    return DEFAULT_LEVEL


async def log(ctx: Context[Any, Any], level: LoggingLevel, message: str) -> None:
    """Send ``message`` to ``ctx``'s client if its session's level lets ``level`` through; a
    client that went away is not an error."""
    lowest = level_of(ctx)
    if lowest is not None and LEVELS.index(level) < LEVELS.index(lowest):
        return
    try:
        await ctx.log(level, message, logger_name=LOGGER)
    except Exception:  # the request's stream is gone: its result cannot be delivered either
        return


async def log_registered(ctx: Context[Any, Any], registered: RegisteredServer) -> None:
    """The notable events of registering ``registered``: its API, and each tool's typing notes."""
    tools = registered.package.tools
    count = f"{len(tools)} tool" + ("" if len(tools) == 1 else "s")
    await log(ctx, "info", f"registered MCP server {registered.name!r}: {count} in `{registered.module}`")
    for tool in tools:
        for note in tool.warnings:
            await log(ctx, "warning", note)  # "MCP server 'x', tool 'y': ..."


def _state(session: ServerSession) -> dict[str, Any]:
    """The per-connection state of the client session ``session`` serves a request of (the SDK
    builds a ``ServerSession`` per request; its connection lives as long as the client session)."""
    state: dict[str, Any] = session._connection.state
    return state
