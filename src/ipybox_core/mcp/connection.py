"""One healthy connection to one MCP server, reconnected on demand.

An ``async with Client(...)`` must be left by the task that entered it, and a transport failure
(a dead Streamable HTTP server raises an ``ExceptionGroup`` and cancels the task that holds the
connection) must not reach the application's own tasks. So each connection is owned by one
private asyncio task, the *actor*: it enters the client, lists the tools, then waits until it is
told to stop or the server closes the stream, and absorbs whatever the transport raises.

Calls run in the caller's task on the shared session, so many calls multiplex on one connection,
and cancelling a caller cancels its upstream request (``notifications/cancelled``) without
touching the connection. When the connection ends, calls in flight fail with
:class:`McpConnectionError` (with the tail of a stdio server's stderr) and the next call
reconnects.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import shutil
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, TextIO

import anyio
from mcp import Client, MCPError
from mcp.types import (
    CONNECTION_CLOSED,
    METHOD_NOT_FOUND,
    REQUEST_TIMEOUT,
    UNSUPPORTED_PROTOCOL_VERSION,
    CallToolResult,
    Implementation,
)
from pydantic import ValidationError

from ipybox_core.errors import (
    McpAuthorizationError,
    McpConnectionError,
    McpProtocolError,
    McpServerError,
    McpTimeout,
    ToolError,
    UnknownToolError,
)
from ipybox_core.kernel._stale_dirs import mark_owner
from ipybox_core.mcp._first_call import (
    build_call_models,
    build_output_validator,
    compile_output_validators_soon,
)
from ipybox_core.mcp._lenient import LenientTransport
from ipybox_core.mcp._listing import list_all_tools
from ipybox_core.mcp._schema_import import (
    import_jsonschema,
    import_jsonschema_in_background,
    jsonschema_imported,
)
from ipybox_core.mcp._transports import HttpAuth, open_transport
from ipybox_core.mcp._upstream import UpstreamRequests
from ipybox_core.mcp.config import McpServerConfig, StdioServerConfig
from ipybox_core.mcp.elicitation import Elicit
from ipybox_core.mcp.oauth import Authorize, AuthState, build_provider, failure_line
from ipybox_core.mcp.oauth_store import FileTokenStore, TokenStore
from ipybox_core.mcp.results import ToolCallResult, is_over_limit, result_too_large, to_tool_call_result
from ipybox_core.mcp.sampling import Sample
from ipybox_core.mcp.types import DEFAULT_CALL_TIMEOUT, DEFAULT_CONNECT_TIMEOUT, ToolInfo

__all__ = ["DEFAULT_CALL_TIMEOUT", "DEFAULT_CONNECT_TIMEOUT", "McpConnection"]
CLOSE_GRACE = 10.0
"""Seconds a closing connection may take (a stdio server gets 2 s after EOF, then SIGTERM, SIGKILL)."""
STDERR_TAIL_CHARS = 2000
LOST_REASON_WAIT = 1.0
"""Seconds a call that lost its connection waits for the transport's error, to name the cause."""

_log = logging.getLogger(__name__)


def _client_info() -> Implementation:
    try:
        return Implementation(name="ipybox", version=version("ipybox"))
    except PackageNotFoundError:
        return Implementation(name="ipybox", version="0")


def _describe(exc: BaseException) -> str:
    """One line per leaf exception of a (nested) exception group, cancellations left out."""
    if isinstance(exc, BaseExceptionGroup):
        leaves = [
            _describe(inner) for inner in exc.exceptions if not isinstance(inner, asyncio.CancelledError)
        ]
        return "; ".join(leaf for leaf in leaves if leaf) or "cancelled"
    if isinstance(exc, MCPError):
        return f"MCP error {exc.code}: {exc.message}"
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _refuses_handshake(exc: BaseException) -> bool:
    """Whether the server answered ``initialize`` with an error (a 2026-07-28-only server)."""
    return any(
        isinstance(leaf, MCPError) and leaf.code in (UNSUPPORTED_PROTOCOL_VERSION, METHOD_NOT_FOUND)
        for leaf in _leaves(exc)
    )


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _leaves(inner)]
    return [exc]


@dataclass(eq=False)
class _Session:
    """One attempt to connect and, if it succeeds, the live connection it holds."""

    ready: asyncio.Future[list[ToolInfo]]
    abort: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    stop: anyio.Event = field(default_factory=anyio.Event)
    inflight: set[anyio.CancelScope] = field(default_factory=set)
    client: Client | None = None
    task: asyncio.Task[None] | None = None
    ended: bool = False
    end_reason: str | None = None
    stderr_offset: int = 0
    notice: str | None = None
    """For the first call that succeeds on this session: it replaced one that ended by itself."""
    prepared: set[str] = field(default_factory=set)
    """The tools whose first call's work is done on this connection (see :meth:`McpConnection.tool`)."""
    validators_compiled: asyncio.Future[None] | None = None
    """Done when the validators compiled right after connecting are (``None``: none to compile)."""

    @property
    def usable(self) -> bool:
        return self.client is not None and not self.ended and not self.stop.is_set()

    def end(self, reason: str) -> None:
        """Ask the actor to close this connection (idempotent; the first reason wins)."""
        if self.end_reason is None:
            self.end_reason = reason
        self.stop.set()


class McpConnection:
    """A connection to one MCP server that connects lazily and reconnects after a failure.

    Use :meth:`connect` (or just :meth:`call`), and :meth:`aclose` when done; no server process
    outlives :meth:`aclose`. ``connect_timeout``/``call_timeout`` are defaults that the server's
    config overrides. ``elicit``, ``sample`` and ``roots`` answer the server's own requests (see
    :class:`~ipybox_core.mcp.registry.McpRegistry`).
    """

    def __init__(
        self,
        name: str,
        config: McpServerConfig,
        *,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        call_timeout: float = DEFAULT_CALL_TIMEOUT,
        log_dir: Path | None = None,
        authorize: Authorize | None = None,
        token_store: TokenStore | None = None,
        elicit: Elicit | None = None,
        sample: Sample | None = None,
        roots: Sequence[str | Path] | None = None,
    ) -> None:
        self.name = name
        self._upstream = UpstreamRequests(name, elicit=elicit, sample=sample, roots=roots)
        self.config = config
        self._auth_state = AuthState()
        self._http = self._http_auth(authorize, token_store)
        self.connect_timeout = config.connect_timeout or connect_timeout
        self.call_timeout = config.call_timeout or call_timeout
        self._log_dir = log_dir
        self._owns_log_dir = log_dir is None
        self._tools: dict[str, ToolInfo] = {}
        self._session: _Session | None = None
        self._lock = asyncio.Lock()
        self._actors: set[asyncio.Task[None]] = set()
        self._closed = False
        self._modern = False
        self.protocol_version: str | None = None
        """The protocol version the last connection negotiated."""
        self.last_connect_seconds: float | None = None
        """How long the last successful connect (including the tool listing) took."""

    def __repr__(self) -> str:
        return f"McpConnection({self.name!r}, {self.config.transport}: {self.config.describe()!r})"

    def _http_auth(self, authorize: Authorize | None, token_store: TokenStore | None) -> HttpAuth | None:
        """OAuth (when configured) and the response hook that notices a 401, for HTTP and SSE servers."""
        url: str | None = getattr(self.config, "url", None)
        if url is None:
            return None
        state = self._auth_state
        endpoint = url.split("?", 1)[0].rstrip("/")

        async def on_response(response: Any) -> None:
            if str(response.request.url).split("?", 1)[0].rstrip("/") == endpoint:
                await state.on_response(response)

        oauth = getattr(self.config, "auth", None)
        if oauth is None:
            return HttpAuth(on_response=on_response)
        store = token_store if token_store is not None else FileTokenStore()
        provider = build_provider(self.name, url, oauth, store=store, authorize=authorize, state=state)
        return HttpAuth(auth=provider, on_response=on_response)

    def _authorization_failure(self) -> str | None:
        """The one line for a failure that was about authorization, else ``None``."""
        headers = {key.lower() for key in getattr(self.config, "headers", {})}
        return failure_line(
            self.name,
            getattr(self.config, "auth", None),
            self._auth_state,
            static_header="authorization" in headers,
        )

    # --- what is known about the server ---------------------------------------------------------

    @property
    def tools(self) -> list[ToolInfo]:
        """The tools of the last successful listing (empty before the first connect)."""
        return list(self._tools.values())

    def tool(self, name: str) -> ToolInfo:
        """The listed tool called ``name``.

        A lookup means a call is coming (the tool server looks a call's tool up before deciding it):
        while connected, it builds what the tool's first call would build (its output-schema
        validator, the protocol models of a call), so a call held for approval runs right after the
        approval.

        Raises:
            UnknownToolError: the server did not list such a tool.
        """
        try:
            info = self._tools[name]
        except KeyError:
            known = ", ".join(sorted(self._tools)) or "none"
            raise UnknownToolError(
                f"MCP server {self.name!r} has no tool {name!r} (tools: {known})"
            ) from None
        self._prepare_call(name)
        return info

    def _prepare_call(self, name: str) -> None:
        session = self._session
        if session is None or name in session.prepared or not session.usable or session.client is None:
            return
        build_call_models(self.protocol_version)
        if not jsonschema_imported():  # still importing in the background: the call compiles it
            return
        build_output_validator(session.client.session, name)
        session.prepared.add(name)

    @property
    def connected(self) -> bool:
        """Whether a live connection is open right now."""
        return self._session is not None and self._session.usable

    @property
    def stderr_log(self) -> Path | None:
        """The file collecting a stdio server's stderr (``None`` for HTTP and SSE servers)."""
        if not isinstance(self.config, StdioServerConfig) or self._log_dir is None:
            return None
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in self.name) or "server"
        return self._log_dir / f"{safe}.stderr.log"

    def stderr_tail(self, since: int = 0) -> str:
        """The last lines a stdio server wrote to stderr (since byte offset ``since``)."""
        path = self.stderr_log
        if path is None or not path.exists():
            return ""
        with path.open("rb") as log:
            size = log.seek(0, 2)
            log.seek(max(since, size - STDERR_TAIL_CHARS))
            return log.read().decode(errors="replace").strip()

    # --- connecting -----------------------------------------------------------------------------

    async def connect(self) -> list[ToolInfo]:
        """Connect (unless connected) and return the server's tools.

        Raises:
            McpConnectionError: the server could not be started or reached, did not answer within
                the connect timeout, or failed to list its tools.
        """
        await self._live_session()
        return self.tools

    async def _live_session(self) -> _Session:
        session = self._session
        if session is not None and session.usable:
            return session
        async with self._lock:
            if self._closed:
                raise McpConnectionError(
                    f"connection to MCP server {self.name!r} is closed", server=self.name
                )
            session = self._session
            if session is not None and session.usable:
                return session
            self._session = None
            if session is not None:
                await self._finish(session)
            replaced = session
            session = await self._start_session()
            if replaced is not None:  # it ended by itself: disconnect() leaves no session behind
                session.notice = self._restart_notice(replaced)
                _log.warning("%s", session.notice)
            self._session = session
            return session

    def _restart_notice(self, ended: _Session) -> str:
        reason = ended.end_reason or "the connection ended"
        if isinstance(self.config, StdioServerConfig):
            return (
                f"MCP server {self.name!r} had stopped ({reason}) and was restarted: "
                "whatever it kept from earlier calls is gone"
            )
        return (
            f"MCP server {self.name!r} had lost its connection ({reason}) and was reconnected "
            "in a new session: state tied to the old session is gone"
        )

    async def _start_session(self) -> _Session:
        session = _Session(ready=asyncio.get_running_loop().create_future())
        task = asyncio.create_task(self._actor(session), name=f"ipybox-mcp:{self.name}")
        session.task = task
        self._actors.add(task)
        task.add_done_callback(self._actors.discard)
        started = time.monotonic()
        self._auth_state.reset()
        try:
            tools = await self._wait_ready(session, started)
        except TimeoutError:
            session.ready.cancel()
            session.abort.cancel()
            await asyncio.shield(task)
            raise McpConnectionError(
                self._with_stderr(
                    f"MCP server {self.name!r} ({self._what()}) did not connect "
                    f"within {self.connect_timeout:g} s",
                    session,
                ),
                server=self.name,
            ) from None
        except asyncio.CancelledError:
            session.ready.cancel()
            session.abort.cancel()  # the actor unwinds in its own task; aclose() waits for it
            raise
        except McpConnectionError:
            await asyncio.shield(task)
            raise
        self._tools = {tool.name: tool for tool in tools}
        self.last_connect_seconds = time.monotonic() - started
        if any(tool.output_schema is not None for tool in tools):  # off the first call's path
            import_jsonschema_in_background()
            if session.client is not None:
                session.validators_compiled = compile_output_validators_soon(
                    session.client.session, alive=lambda: session.usable
                )
        return session

    async def _wait_ready(self, session: _Session, started: float) -> list[ToolInfo]:
        """The connect timeout, not counting the time a user spends authorizing in a browser."""
        while True:
            waiting = self._auth_state.waiting_since is not None
            remaining = started + self.connect_timeout + self._auth_state.user_wait() - time.monotonic()
            if remaining <= 0 and not waiting:
                raise TimeoutError
            try:
                return await asyncio.wait_for(asyncio.shield(session.ready), max(remaining, 0.5))
            except TimeoutError:
                continue

    def _what(self) -> str:
        return f"{self.config.transport}: {self.config.describe()}"

    def _hint(self, failure: BaseException) -> str:
        """What to do about a stdio server that is missing or exits (docs/troubleshooting.md)."""
        if not isinstance(self.config, StdioServerConfig):
            return ""
        leaves = _leaves(failure)
        if any(isinstance(leaf, FileNotFoundError) for leaf in leaves):
            if Path(self.config.command).is_absolute():
                return f" (there is no executable file {self.config.command!r}: check the path)"
            return (
                " (the command is not on the application's PATH: use an absolute path, "
                "sys.executable for Python servers)"
            )
        if any(isinstance(leaf, MCPError) and leaf.code == CONNECTION_CLOSED for leaf in leaves):
            return (
                " (the server exited: its stderr says why, e.g. a missing API key or package; a stdio "
                "server gets only HOME, LOGNAME, PATH, SHELL, TERM, USER and its config's env)"
            )
        return ""

    def _with_stderr(self, message: str, session: _Session) -> str:
        tail = self.stderr_tail(session.stderr_offset)
        return f"{message}\n--- server stderr (last lines) ---\n{tail}" if tail else message

    def _open_errlog(self, session: _Session) -> TextIO | None:
        if not isinstance(self.config, StdioServerConfig):
            return None
        if self._log_dir is None:
            self._log_dir = Path(tempfile.mkdtemp(prefix="ipybox-mcp-"))
            mark_owner(self._log_dir)
        path = self.stderr_log
        assert path is not None
        path.parent.mkdir(parents=True, exist_ok=True)
        errlog = path.open("a", encoding="utf-8")
        errlog.write(f"=== {time.strftime('%Y-%m-%d %H:%M:%S')} connecting: {self.config.describe()}\n")
        errlog.flush()
        session.stderr_offset = errlog.tell()
        return errlog

    async def _actor(self, session: _Session) -> None:
        """Own one connection from connect to close; never raises (except on its own cancellation)."""
        errlog = self._open_errlog(session)
        failure: BaseException | None = None
        transport: LenientTransport | None = None
        try:
            with session.abort:
                modes = self._modes()
                for attempt, mode in enumerate(modes, 1):
                    transport = LenientTransport(
                        open_transport(
                            self.config, errlog=errlog, connect_timeout=self.connect_timeout, http=self._http
                        ),
                        server=self.name,
                        on_closed=lambda: session.end("the server closed the connection"),
                        strict_stdout=isinstance(self.config, StdioServerConfig),
                        max_message_bytes=self.config.max_result_bytes,
                    )
                    try:
                        await self._hold(session, transport, mode)
                        break
                    except Exception as exc:
                        if attempt == len(modes) or session.ready.done() or not _refuses_handshake(exc):
                            raise
                        _log.info("MCP server %r refused initialize: connecting with 2026-07-28", self.name)
                        session.stop, session.end_reason = anyio.Event(), None  # the refusal closed it
        except BaseException as exc:
            task = asyncio.current_task()
            if isinstance(exc, asyncio.CancelledError) and task is not None and task.cancelling():
                raise  # this task itself is being cancelled (event loop shutdown): let it end
            failure = exc
        finally:
            session.ended = True
            garbage = transport.stdout_garbage if transport is not None else None
            if garbage is not None:  # the cause, whatever the session made of the stream's end
                session.end_reason = (
                    f"the server wrote non-protocol output on stdout (MCP stdio servers must write only "
                    f"JSON-RPC messages there, and log to stderr); first offending line: {garbage!r}"
                )
            elif failure is not None:  # the transport's own error says more than "closed"
                session.end_reason = _describe(failure) + self._hint(failure)
            for scope in list(session.inflight):
                scope.cancel()
            refused = self._authorization_failure() if failure is not None else None
            if refused is not None and not session.ready.done():
                session.end_reason = refused
                session.ready.set_exception(McpAuthorizationError(refused, server=self.name))
            elif not session.ready.done():
                reason = session.end_reason if failure is not None or garbage else "the connection ended"
                session.ready.set_exception(
                    McpConnectionError(
                        self._with_stderr(
                            f"cannot connect to MCP server {self.name!r} ({self._what()}): {reason}", session
                        ),
                        server=self.name,
                    )
                )
            if errlog is not None:
                errlog.close()

    def _modes(self) -> list[str]:
        """The handshakes to try in turn (``"fallback"``: ``initialize``, then 2026-07-28)."""
        if self.config.protocol != "fallback":
            return [self.config.protocol]
        if self._modern:  # this server refused initialize before: no second refusal per connect
            return ["auto"]
        return ["legacy", "auto"]

    async def _hold(self, session: _Session, transport: LenientTransport, mode: str) -> None:
        """Connect in ``mode``, list the tools, then hold the connection until told to stop."""
        client = Client(
            transport, mode=mode, cache=None, client_info=_client_info(), **self._upstream.client_options()
        )
        async with client:
            transport.protocol_version = self.protocol_version = client.protocol_version
            self._modern = mode != "legacy" and client.protocol_version.startswith("2026")
            tools = await list_all_tools(client, server=self.name)
            session.client = client
            if session.ready.done():  # the connect attempt was given up meanwhile
                return
            session.ready.set_result(tools)
            await session.stop.wait()

    async def _finish(self, session: _Session, reason: str = "closed by the application") -> None:
        """Close ``session`` gracefully; abort it if closing takes longer than :data:`CLOSE_GRACE`."""
        session.end(reason)
        task = session.task
        if task is None:
            return
        try:
            await asyncio.wait_for(asyncio.shield(task), CLOSE_GRACE)
        except TimeoutError:
            session.abort.cancel()
            await asyncio.shield(task)

    async def disconnect(self) -> None:
        """Close the connection (and stop a stdio server); the next call reconnects."""
        async with self._lock:
            session, self._session = self._session, None
            if session is not None:
                await self._finish(session)

    async def aclose(self) -> None:
        """Close for good: later calls raise :class:`McpConnectionError`; no server process is left."""
        self._closed = True
        await self.disconnect()
        for task in list(self._actors):
            with contextlib.suppress(BaseException):
                await asyncio.shield(task)
        if self._owns_log_dir and self._log_dir is not None:
            shutil.rmtree(self._log_dir, ignore_errors=True)
            self._log_dir = None

    # --- calling --------------------------------------------------------------------------------

    async def call(
        self, tool: str, arguments: Mapping[str, Any] | None = None, *, timeout: float | None = None
    ) -> ToolCallResult:
        """Call ``tool`` with ``arguments`` (connecting first if needed).

        Raises:
            UnknownToolError: the server did not list ``tool``.
            ToolError: the tool returned an error result, or the server answered the call with a
                JSON-RPC error (its ``code``, ``data`` and message), or the result was larger than
                the config's ``max_result_bytes`` (:class:`~ipybox_core.mcp.results.ResultTooLarge`).
            McpTimeout: no answer within ``timeout`` (default: the call timeout); the request is
                cancelled upstream and the connection stays usable.
            McpConnectionError: the server could not be reached, or the connection was lost during
                the call (the next call reconnects).
            McpProtocolError: the server answered with a malformed result.

        The server's log and progress messages during the call are the result's ``notices`` (or
        lines added to the error's message).
        """
        try:
            result = await self._call(tool, arguments, timeout)
        except (ToolError, McpServerError) as exc:
            notices = self._upstream.take_notices()
            if notices and exc.args:  # what the server said before failing belongs to the failure
                exc.args = ("\n".join((str(exc.args[0]), *notices)), *exc.args[1:])
            raise
        except BaseException:  # cancelled with its execution: what it was told ends with it, not
            self._upstream.take_notices()  # in the next call's output (a question declined for it)
            raise
        notices = result.notices + self._upstream.take_notices()
        return dataclasses.replace(result, notices=notices) if notices else result

    async def _call(
        self, tool: str, arguments: Mapping[str, Any] | None, timeout: float | None
    ) -> ToolCallResult:
        session = await self._live_session()
        info = self.tool(tool)
        limit = self.call_timeout if timeout is None else timeout
        if info.output_schema is not None:  # the client validates the result with jsonschema
            import_jsonschema()
        client = session.client
        assert client is not None
        scope = anyio.CancelScope()
        session.inflight.add(scope)
        self._auth_state.failure = None
        raw: CallToolResult | None = None
        try:
            with scope, self._upstream.calling(tool, limit):  # its clock stops while the user answers
                raw = await client.call_tool(
                    tool, dict(arguments or {}), progress_callback=self._upstream.on_progress
                )
        except MCPError as exc:
            if is_over_limit(exc.message):  # refused by the SSE reader or by the lenient transport
                raise result_too_large(self.name, tool, self.config.max_result_bytes) from exc
            refused = self._authorization_failure()
            if refused is not None:
                raise McpAuthorizationError(refused, server=self.name) from exc
            if exc.code == CONNECTION_CLOSED:
                raise await self._lost_error(session, tool) from exc
            raise self._call_error(exc, tool, limit) from exc
        except ValidationError as exc:
            raise McpProtocolError(
                f"MCP server {self.name!r} returned a malformed result for {tool!r}: "
                f"{exc.error_count()} problem(s), first: {exc.errors()[0]['msg']} at "
                f"{'.'.join(str(part) for part in exc.errors()[0]['loc'])}",
                server=self.name,
            ) from exc
        except RuntimeError as exc:  # structured content that breaks the tool's output schema
            raise McpProtocolError(f"MCP server {self.name!r}: {exc}", server=self.name) from exc
        finally:
            session.inflight.discard(scope)
        if raw is None:  # the scope was cancelled: the connection ended under the call
            raise await self._lost_error(session, tool)
        result = to_tool_call_result(raw, server=self.name, tool=info)
        notice, session.notice = session.notice, None
        return dataclasses.replace(result, notices=(notice,)) if notice else result

    def _call_error(self, exc: MCPError, tool: str, limit: float) -> Exception:
        if exc.code == REQUEST_TIMEOUT:
            return McpTimeout(
                f"MCP server {self.name!r}: tool {tool!r} did not answer within {limit:g} s", server=self.name
            )
        return ToolError(  # the server is alive and answered: the call failed, not the connection
            f"MCP server {self.name!r}: tool {tool!r} failed with JSON-RPC error {exc.code}: {exc.message}",
            server=self.name,
            tool=tool,
            code=exc.code,
            data=exc.data,
        )

    async def _lost_error(self, session: _Session, tool: str) -> Exception:
        """The error for a call whose connection ended: lost, or (SSE) ended at a result over the limit."""
        lost = await self._lost(session, tool)
        if is_over_limit(session.end_reason or ""):  # the SSE reader gives up at an event over the limit
            return result_too_large(self.name, tool, self.config.max_result_bytes)
        return McpConnectionError(lost, server=self.name)

    async def _lost(self, session: _Session, tool: str) -> str:
        """Close the broken session and describe why it ended (waiting briefly for the reason)."""
        session.stop.set()
        if session.task is not None:
            await asyncio.wait({session.task}, timeout=LOST_REASON_WAIT)
        reason = session.end_reason or "the connection closed"
        return self._with_stderr(
            f"MCP server {self.name!r} ({self._what()}) lost the connection during the call to {tool!r} "
            f"({reason}); the next call reconnects",
            session,
        )
