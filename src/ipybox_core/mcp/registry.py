"""The MCP servers an application has registered, by name."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

from ipybox_core.errors import UnknownToolError
from ipybox_core.kernel._stale_dirs import mark_owner
from ipybox_core.mcp.config import McpServerConfig, parse_server_config
from ipybox_core.mcp.types import DEFAULT_CALL_TIMEOUT, DEFAULT_CONNECT_TIMEOUT, ToolInfo

if TYPE_CHECKING:  # the MCP client library takes most of a second to import: loaded on first connect
    from ipybox_core.mcp.connection import McpConnection
    from ipybox_core.mcp.elicitation import Elicit
    from ipybox_core.mcp.oauth import Authorize
    from ipybox_core.mcp.oauth_store import TokenStore
    from ipybox_core.mcp.results import ToolCallResult
    from ipybox_core.mcp.sampling import Sample


class McpRegistry:
    """Named connections to MCP servers; each connects, fails and reconnects on its own.

    ``connect_timeout``/``call_timeout`` are defaults (seconds) that a server's config overrides.
    ``environ`` fills ``${VAR}`` placeholders in configs (default: ``os.environ``). A stdio
    server's stderr is logged to ``log_dir/<name>.stderr.log`` (default: a temporary directory
    removed by :meth:`aclose`).

    Servers whose config has ``"auth": "oauth"`` are authorized with OAuth 2.1: ``authorize`` is the
    application's answer to an :class:`~ipybox_core.mcp.oauth.AuthorizationRequest` (open the URL,
    return the URL the browser came back to), ``token_store`` keeps tokens on the host (default: a
    :class:`~ipybox_core.mcp.oauth_store.FileTokenStore` under the user's state directory).

    What a server asks of its client during a tool call goes to the application: ``elicit`` answers
    an :class:`~ipybox_core.mcp.elicitation.ElicitationRequest` (a form for the user; without it,
    questions are declined and the calling code is told why), ``sample`` a
    :class:`~ipybox_core.mcp.sampling.SamplingRequest` (an LLM completion; without it, refused with
    an error naming this option); ``roots/list`` is answered with ``roots`` (paths or ``file://``
    URIs; default: none).
    """

    def __init__(
        self,
        *,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        call_timeout: float = DEFAULT_CALL_TIMEOUT,
        environ: Mapping[str, str] | None = None,
        log_dir: Path | None = None,
        authorize: Authorize | None = None,
        token_store: TokenStore | None = None,
        elicit: Elicit | None = None,
        sample: Sample | None = None,
        roots: Sequence[str | Path] | None = None,
    ) -> None:
        self.connect_timeout = connect_timeout
        self.elicit = elicit
        self.sample = sample
        self.roots = roots
        self.authorize = authorize
        self.token_store = token_store
        self.call_timeout = call_timeout
        self._environ = environ
        self._log_dir = log_dir
        self._owns_log_dir = log_dir is None
        self._connections: dict[str, McpConnection] = {}

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    @property
    def servers(self) -> list[str]:
        """The registered server names, in registration order."""
        return list(self._connections)

    @property
    def log_dir(self) -> Path:
        """The directory holding the stdio servers' stderr logs."""
        if self._log_dir is None:
            self._log_dir = Path(tempfile.mkdtemp(prefix="ipybox-mcp-"))
            mark_owner(self._log_dir)
        return self._log_dir

    def connection(self, server: str) -> McpConnection:
        """The connection of a registered server.

        Raises:
            UnknownToolError: no server of that name is registered.
        """
        try:
            return self._connections[server]
        except KeyError:
            known = ", ".join(self._connections) or "none"
            raise UnknownToolError(f"no MCP server {server!r} is registered (servers: {known})") from None

    async def add(self, name: str, config: Mapping[str, Any] | McpServerConfig) -> list[ToolInfo]:
        """Connect to a server, list its tools and register it as ``name``.

        A server already registered under ``name`` is replaced, but only once the new one has
        connected: if connecting fails, the old registration stays as it was.

        Raises:
            ConfigError: the config is invalid or uses an unset ``${VAR}``.
            McpConnectionError: the server could not be started, reached or listed.
        """
        from ipybox_core.mcp.connection import McpConnection

        parsed = parse_server_config(name, config, environ=self._environ)
        connection = McpConnection(
            name,
            parsed,
            connect_timeout=self.connect_timeout,
            call_timeout=self.call_timeout,
            log_dir=self.log_dir,
            authorize=self.authorize,
            token_store=self.token_store,
            elicit=self.elicit,
            sample=self.sample,
            roots=self.roots,
        )
        try:
            tools = await connection.connect()
        except BaseException:
            await asyncio.shield(connection.aclose())
            raise
        previous = self._connections.pop(name, None)
        self._connections[name] = connection
        if previous is not None:
            await previous.aclose()
        return tools

    def tools(self, server: str) -> list[ToolInfo]:
        """The tools of ``server`` as last listed."""
        return self.connection(server).tools

    def tool(self, server: str, tool: str) -> ToolInfo:
        """One tool of ``server``.

        Raises:
            UnknownToolError: unknown server or tool.
        """
        return self.connection(server).tool(tool)

    async def call(
        self,
        server: str,
        tool: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        timeout: float | None = None,
    ) -> ToolCallResult:
        """Call a tool; see :meth:`McpConnection.call` for the errors it raises."""
        return await self.connection(server).call(tool, arguments, timeout=timeout)

    async def restart(self) -> None:
        """Close every connection; each reconnects on its next call (tools stay as listed)."""
        await asyncio.gather(*(connection.disconnect() for connection in self._connections.values()))

    async def remove(self, server: str) -> None:
        """Close and forget one server.

        Raises:
            UnknownToolError: no server of that name is registered.
        """
        connection = self.connection(server)
        del self._connections[server]
        await connection.aclose()

    async def aclose(self) -> None:
        """Close every connection; no server process is left running."""
        connections, self._connections = list(self._connections.values()), {}
        await asyncio.gather(*(connection.aclose() for connection in connections))
        if self._owns_log_dir and self._log_dir is not None:
            shutil.rmtree(self._log_dir, ignore_errors=True)
            self._log_dir = None
