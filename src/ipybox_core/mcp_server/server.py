"""The ipybox MCP server: code actions with approved MCP calls, for any MCP client."""

import asyncio
import contextlib
import json
import os
import signal
import socket
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from mcp.server import MCPServer
from mcp.server.mcpserver import Context, RequestStateSecurity
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.streamable_http import MCP_SESSION_ID_HEADER
from mcp_types import CallToolResult, InputRequiredResult, TextContent, ToolAnnotations
from mcp_types.version import is_version_at_least
from pydantic import Field
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ipybox_core import protocol
from ipybox_core._http_limits import ListenerLimits, descriptor_budget_limits, plain_refusal, repeats_limited
from ipybox_core._http_listener import HttpListener
from ipybox_core.errors import ConfigError, IpyboxError
from ipybox_core.mcp_server import _client_log, _execute, inbox
from ipybox_core.mcp_server._events import resumable_http_app
from ipybox_core.mcp_server._protocol_errors import SpecErrorsServer
from ipybox_core.mcp_server._results import error_result, failure_result, text_result
from ipybox_core.mcp_server._stdio import run_stdio
from ipybox_core.mcp_server.approvals import INPUT_REQUIRED_VERSION, Answer, Approver
from ipybox_core.mcp_server.auth import TOKEN_ENV, BearerAuth, HostCheck, allowed_hosts, resolve_token
from ipybox_core.mcp_server.health import HealthEndpoints
from ipybox_core.mcp_server.packages import install_requirements
from ipybox_core.mcp_server.service import DEFAULT_SESSION, ClientSession, IpyboxService, first_line
from ipybox_core.protocol import MOVED_ON

SERVER_NAME = "ipybox"
SESSION_HEADER = "Ipybox-Session"
"""A 2026-07-28 client (which has no MCP session) names its session in this header."""
_SESSION_NAME = protocol.SESSION_NAME

INSTRUCTIONS = """\
ipybox runs Python in a stateful IPython kernel (variables, imports and functions persist between
`execute_code` calls) and exposes MCP servers to that code as a typed Python API:
`from mcptools.<server> import <tool>`; each tool is a function with keyword arguments. Call
`api_reference` to see the signatures of every registered server's tools, and `register_mcp_server`
to add a server. Prefer one `execute_code` call that calls several tools and processes their results
in Python (filter, join, aggregate, print only what matters) over many small calls. Each MCP call
the code makes may need the user's approval; a rejected call raises PermissionError in the code, a
failing tool raises ToolError. Images the code displays (e.g. matplotlib) are returned as images.
"""

EXECUTE_CODE_DESCRIPTION = """\
Execute Python code in a stateful IPython kernel and return its output (stdout, stderr, the value of
the last expression) and the images it displayed. If the code raises, the result is the traceback:
fix the code and try again. Top-level `await` works; `!cmd` runs a shell command. MCP tools are
importable from `mcptools` (see `api_reference`); each call may wait for the user's approval and
raises PermissionError when rejected."""


TEXT_ONLY = False
"""``structured_output`` of the tools that answer with text: no output schema, so a client has no
result to validate (the MCP client's validator, jsonschema, can take seconds to import)."""


def build_server(service: IpyboxService, *, inbox_tools: bool = False) -> MCPServer[Any]:
    """The MCP server with ipybox's tools (the caller starts and closes ``service``);
    ``inbox_tools``: with the approvals inbox's (``list_approvals``, ``answer_approval``), for
    ``ipybox serve``, where application processes share the service."""
    ttl = service.settings.approval_timeout + 60.0
    server: MCPServer[Any] = SpecErrorsServer(
        SERVER_NAME,
        version=_version(),
        instructions=INSTRUCTIONS,
        log_level="WARNING",
        request_state_security=RequestStateSecurity.ephemeral(ttl=ttl),
    )
    _client_log.add_set_level(server)
    approver = Approver(auto_approve=service.settings.auto_approve)
    decisions = _execute.Decisions()
    settings = service.settings

    @server.tool(description=EXECUTE_CODE_DESCRIPTION, annotations=ToolAnnotations(open_world_hint=True))
    async def execute_code(
        code: Annotated[str, Field(description="Python code (IPython syntax) to execute")],
        ctx: Context[Any, Any],
        timeout: Annotated[
            float | None,
            Field(description=f"seconds before the code is interrupted (default {settings.timeout:g})", gt=0),
        ] = None,
        max_output_chars: Annotated[
            int | None,
            Field(
                description=f"longest text returned; longer output keeps its head and tail "
                f"(default {settings.output_limit})",
                ge=100,
                le=100_000,
            ),
        ] = None,
    ) -> CallToolResult | InputRequiredResult:
        caller = caller_of(ctx)
        if ctx.request_state is not None:
            return await _execute.resume(service, approver, ctx, caller, ctx.request_state, decisions)
        if protocol.meta_value(ctx.request_context.meta, protocol.RESUME) is True:
            return await _execute.resume_call(service, approver, ctx, caller)
        limit = max_output_chars or settings.output_limit
        try:
            session = await service.session(caller.session)
        except IpyboxError as exc:
            return error_result("unavailable", f"Error: {exc}")
        return await _guard(_execute.start(service, approver, ctx, session, caller, code, timeout, limit))

    @server.tool(annotations=ToolAnnotations(open_world_hint=True), structured_output=TEXT_ONLY)
    async def register_mcp_server(
        name: Annotated[str, Field(description="name of the server; its API is `mcptools.<name>`")],
        config: Annotated[
            dict[str, Any],
            Field(
                description='the server config as in an mcpServers file: {"command": ..., "args": [...], '
                '"env": {...}} for stdio, {"url": ..., "headers": {...}} for Streamable HTTP or SSE; '
                "${VAR} placeholders are filled from the ipybox server's environment"
            ),
        ],
        ctx: Context[Any, Any],
    ) -> str:
        """Connect to an MCP server and generate its typed Python API; returns the API's signatures.

        A stdio server runs on the host, outside any sandbox. Registering a name again replaces
        the server and its API.
        """
        async with _using(service, ctx) as session:
            assert session.executor is not None
            try:
                registered = await session.executor.register_mcp_server(name, config)
            except IpyboxError as exc:
                raise ToolError(str(exc)) from None
            session.startup_failures.pop(name, None)
        await _client_log.log_registered(ctx, registered)
        return registered.reference

    @server.tool(annotations=ToolAnnotations(read_only_hint=True), structured_output=TEXT_ONLY)
    async def list_mcp_servers(ctx: Context[Any, Any]) -> str:
        """The registered MCP servers: name, Python module, connection and number of tools."""
        async with _using(service, ctx) as session:
            assert session.executor is not None
            servers = session.executor.servers
        lines = [
            f"{name}: `{reg.module}`, {len(reg.package.tools)} tools, {reg.config.describe()}"
            for name, reg in sorted(servers.items())
        ]
        lines += [f"{name}: FAILED to start: {error}" for name, error in session.startup_failures.items()]
        return "\n".join(lines) if lines else "No MCP servers are registered."

    @server.tool(annotations=ToolAnnotations(read_only_hint=True), structured_output=TEXT_ONLY)
    async def api_reference(
        ctx: Context[Any, Any],
        servers: Annotated[
            list[str] | None, Field(description="only these servers (default: all registered servers)")
        ] = None,
        max_chars: Annotated[
            int | None, Field(description="shorten the reference to this size", ge=200)
        ] = None,
    ) -> str:
        """Python signatures of the registered MCP servers' tools, to use in `execute_code`."""
        try:
            source = await service.reference_source(session_key(ctx))
        except IpyboxError as exc:
            raise ToolError(str(exc)) from None
        down = {
            name: f"MCP server {name!r} is not available: {first_line(error)}"
            for name, error in service.failures().items()
            if name not in source.servers
        }
        notes = [f"# {message}" for message in down.values()]
        unknown = sorted(set(servers or []) - set(source.servers))
        if unknown and set(unknown) <= set(down):
            raise ToolError("\n".join(down[name] for name in unknown))
        if unknown:
            raise ToolError(
                f"unknown servers: {', '.join(unknown)} (registered: {', '.join(source.servers)})"
            )
        if not source.servers:
            return "\n".join([*notes, "No MCP servers are registered yet: use register_mcp_server."])
        reference = source.api_reference(servers, max_chars=max_chars)
        return "\n".join([*notes, reference]) if notes and servers is None else reference

    @server.tool(annotations=ToolAnnotations(open_world_hint=True))
    async def install_package(
        packages: Annotated[
            list[str],
            Field(
                description='requirements such as "httpx", "pandas>=2", "name @ https://..."', min_length=1
            ),
        ],
        ctx: Context[Any, Any],
    ) -> CallToolResult:
        """pip-install packages into the kernel's Python environment (on the host, outside any
        sandbox); the running kernel can import them afterwards."""
        async with _using(service, ctx) as session:
            executor = session.executor
            assert executor is not None
            try:
                result = await install_requirements(
                    packages, extra_args=settings.pip_args, timeout=settings.install_timeout
                )
            except IpyboxError as exc:
                raise ToolError(str(exc)) from None
            if result.timed_out:
                return text_result(
                    f"pip timed out after {settings.install_timeout:g} s and was stopped.\n{result.output}",
                    error=True,
                )
            if not result.ok:
                return text_result(
                    f"pip failed (exit code {result.returncode}):\n{result.output}", error=True
                )
            if not executor.busy:
                await executor.execute(
                    "import importlib as _ipybox_il\n_ipybox_il.invalidate_caches()\ndel _ipybox_il"
                )
        return text_result(f"installed: {', '.join(result.requirements)}\n{result.output}")

    @server.tool(
        annotations=ToolAnnotations(destructive_hint=True, idempotent_hint=True), structured_output=TEXT_ONLY
    )
    async def cancel_waiting(
        ctx: Context[Any, Any],
        calls: Annotated[
            list[str] | None,
            Field(description="only these call ids (the `ipybox.dev/call` of their execute_code)"),
        ] = None,
        keep_calls: Annotated[list[str] | None, Field(description="call ids to leave waiting")] = None,
        reason: Annotated[
            str | None, Field(description="why (the pending calls are rejected with it)", max_length=500)
        ] = None,
    ) -> int:
        """Cancel this session's executions that wait for an approval, because the conversation
        moved on: their pending MCP calls never run, and the kernel is free (its state is kept).
        Returns how many were cancelled."""
        return await service.cancel_parked(
            session_key(ctx),
            reason or MOVED_ON,
            only=None if calls is None else set(calls),
            keep=set(keep_calls or ()),
        )

    if inbox_tools:
        _add_inbox_tools(server, service, approver, decisions)

    @server.tool(annotations=ToolAnnotations(destructive_hint=True), structured_output=TEXT_ONLY)
    async def reset(ctx: Context[Any, Any]) -> str:
        """Restart the kernel: all variables and imports are lost; registered MCP servers and their
        API are kept. Also stops a running or waiting execution."""
        async with _using(service, ctx) as session:
            assert session.executor is not None
            await service.cancel_parked(session.key, "the kernel was reset")
            await session.executor.reset()
        return "The kernel was reset: state cleared, MCP servers and their API kept."

    return server


def _add_inbox_tools(
    server: MCPServer[Any], service: IpyboxService, approver: Approver, decisions: _execute.Decisions
) -> None:
    """The approvals inbox's tools (:mod:`.inbox`)."""

    @server.tool(annotations=ToolAnnotations(read_only_hint=True), structured_output=TEXT_ONLY)
    async def list_approvals(
        conversation: Annotated[
            str | None, Field(description="only this conversation (session) key", max_length=256)
        ] = None,
    ) -> str:
        """The approvals inbox: every approval that waits in the service, across conversations
        (conversation, call id, server and tool, arguments, read-only hint, when and by which client
        it was asked, how long it has waited), as JSON {"approvals": [...]}, oldest first."""
        listed = inbox.waiting(service, conversation)
        return json.dumps({"approvals": [protocol.waiting_data(item) for item in listed]}, default=repr)

    @server.tool(annotations=ToolAnnotations(destructive_hint=True))
    async def answer_approval(
        ctx: Context[Any, Any],
        approval_id: Annotated[
            str, Field(description="the id list_approvals gave", min_length=1, max_length=64)
        ],
        approve: Annotated[bool, Field(description="true: run the call; false: reject it")],
        reason: Annotated[
            str | None, Field(description="why it is rejected (the code's PermissionError)", max_length=2000)
        ] = None,
        arguments: Annotated[
            dict[str, Any] | None, Field(description="edited arguments of an approved call")
        ] = None,
    ) -> CallToolResult:
        """Answer a waiting approval from the inbox (audited as client:<name>); its execution
        continues in the service, and the next round of its call gets the outcome."""
        caller = caller_of(ctx)
        reply = Answer("accept" if approve else "decline", reason=reason, arguments=arguments)
        try:
            answered = await inbox.answer(
                service,
                decisions.remember,
                decisions.who,
                lambda execution, call: _execute.drive(service, approver, None, execution, call),
                approval_id=approval_id,
                reply=reply,
                decided_by=caller.decided_by,
                caller_session=caller.session,
            )
        except IpyboxError as error:
            return failure_result(error)
        verb = "approved" if approve else "rejected"
        return CallToolResult(
            content=[
                TextContent(
                    type="text", text=f"{verb} {answered.name} in conversation {answered.conversation}"
                )
            ],
            _meta={protocol.APPROVAL: protocol.waiting_data(answered)},
        )


def session_key(ctx: Context[Any, Any] | None) -> str | None:
    """The client session a tool call belongs to.

    - stdio: ``None``, the default session (one client, one kernel, in the workspace);
    - Streamable HTTP, protocol up to 2025-11-25: the MCP session (``Mcp-Session-Id``, which the
      SDK has checked: an unknown id never reaches a tool);
    - Streamable HTTP, 2026-07-28 (no MCP sessions): the ``Ipybox-Session`` header when the
      client sends one, otherwise :data:`~.service.DEFAULT_SESSION` (the clients without it share
      the default session, a keyed session like the others: its workspace is beside theirs);
    - over HTTP, the request's ``ipybox.dev/session`` ``_meta`` entry comes first (:mod:`.protocol`).
    """
    headers = ctx.headers if ctx is not None else None
    if ctx is None or headers is None:
        return None
    meta_session = protocol.meta_value(ctx.request_context.meta, protocol.SESSION)
    if isinstance(meta_session, str) and _SESSION_NAME.fullmatch(meta_session):
        return f"named:{meta_session}"
    version = ctx.protocol_version
    modern = version is not None and is_version_at_least(version, INPUT_REQUIRED_VERSION)
    if not modern:
        mcp_session = headers.get(MCP_SESSION_ID_HEADER)
        if mcp_session:
            return f"mcp:{mcp_session}"
    named = headers.get(SESSION_HEADER)
    if named and _SESSION_NAME.fullmatch(named):
        return f"named:{named}"
    return DEFAULT_SESSION


def caller_of(ctx: Context[Any, Any]) -> _execute.Caller:
    """The session, call id and client name of a ``tools/call`` (see :mod:`.protocol`)."""
    meta = ctx.request_context.meta
    call, client = protocol.meta_value(meta, protocol.CALL), protocol.meta_value(meta, protocol.CLIENT)
    return _execute.Caller(
        session_key(ctx),
        call=call if isinstance(call, str) and 0 < len(call) <= 256 else None,
        client=client if isinstance(client, str) and _SESSION_NAME.fullmatch(client) else None,
    )


async def _session(service: IpyboxService, ctx: Context[Any, Any] | None) -> ClientSession:
    try:
        return await service.session(session_key(ctx))
    except IpyboxError as exc:
        raise ToolError(str(exc)) from None


@contextlib.asynccontextmanager
async def _using(service: IpyboxService, ctx: Context[Any, Any] | None) -> AsyncIterator[ClientSession]:
    """The caller's session, kept from being closed as idle until the tool is done with it."""
    session = await _session(service, ctx)
    with session.hold():
        yield session


async def _guard(result: Any) -> CallToolResult | InputRequiredResult:
    try:
        value: CallToolResult | InputRequiredResult = await result
    except IpyboxError as exc:
        return text_result(f"Error: {exc}", error=True)
    return value


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("ipybox")
    except PackageNotFoundError:
        return "0"


@dataclass(frozen=True)
class Tls:
    """A certificate chain and its private key (PEM files) to serve HTTPS with."""

    certfile: Path
    keyfile: Path

    def __post_init__(self) -> None:
        for path in (self.certfile, self.keyfile):
            if not Path(path).is_file():
                raise ConfigError(f"TLS file {str(path)!r} does not exist")


async def serve(
    service: IpyboxService,
    *,
    transport: str = "stdio",
    host: str = "127.0.0.1",
    port: int = 8000,
    no_auth: bool = False,
    tls: Tls | None = None,
    on_listening: Callable[[str], None] | None = None,
    on_token: Callable[[str], None] | None = None,
    inbox_tools: bool = False,
) -> None:
    """Serve over stdio (until the client closes the connection) or Streamable HTTP, until SIGINT
    or SIGTERM; when this returns, every kernel and every MCP server process are gone.

    Over Streamable HTTP each MCP session gets its own kernel, and every request must carry the
    bearer token (``IPYBOX_MCP_TOKEN``, or one generated now); ``on_token`` receives the line that
    tells the operator which token to send. ``no_auth`` is refused off loopback. ``tls`` serves
    HTTPS with that certificate and key. ``inbox_tools`` (``ipybox serve``, over Streamable HTTP)
    adds the approvals inbox's tools, which answer other conversations' approvals: not for a
    model's MCP client (``ipybox mcp``).
    """
    if transport not in ("stdio", "streamable-http"):
        raise ConfigError(f"unknown transport {transport!r}: use 'stdio' or 'streamable-http'")
    server = build_server(service, inbox_tools=inbox_tools and transport != "stdio")
    if transport == "stdio":
        async with service:
            if service.settings.require_servers:  # before the handshake: a failure ends the process
                await service.require_servers()
            serving = asyncio.create_task(run_stdio(server))

            def stop() -> None:
                serving.cancel()

            with _on_signals(stop), contextlib.suppress(asyncio.CancelledError):
                await serving
        return
    token, generated = resolve_token(host, no_auth=no_auth, environ=os.environ)
    scheme = "https" if tls else "http"
    with _listen(host, port) as sock:  # before the kernel starts: a busy port fails at once
        (on_token or _stderr)(token_message(token, generated=generated))
        bound_host, bound_port = sock.getsockname()[:2]
        service.start(default_session=False)
        async with service:
            if service.settings.require_servers:  # a config server that cannot start: no service
                await service.require_servers()
            if on_listening is not None:
                shown = f"[{bound_host}]" if sock.family == socket.AF_INET6 else bound_host
                on_listening(f"{scheme}://{shown}:{bound_port}/mcp")
            app = http_app(server, service, host=bound_host, port=bound_port, token=token, scheme=scheme)
            await _serve_http(app, sock, tls, header_timeout=service.settings.header_timeout)


def token_message(token: str | None, *, generated: bool) -> str:
    """The one line that tells the operator how clients authenticate."""
    if token is None:
        return "ipybox MCP server: authentication is OFF (--no-auth): every local user can run code"
    if generated:
        return f'ipybox MCP server token: {token} (clients send the header "Authorization: Bearer {token}")'
    return (
        f'ipybox MCP server token: from {TOKEN_ENV} (clients send the header "Authorization: Bearer <token>")'
    )


def http_app(
    server: MCPServer[Any],
    service: IpyboxService,
    *,
    host: str,
    token: str | None,
    port: int | None = None,
    scheme: str = "http",
) -> ASGIApp:
    """The Streamable HTTP app: bearer authentication in front of the MCP endpoint, and each MCP
    session's kernel closed when the client ends the session. ``GET /healthz`` and ``/readyz``
    (:mod:`.health`) answer without the token. SSE responses can be resumed (:mod:`._events`).

    Without a token (``--no-auth``) there is DNS-rebinding protection instead, on every address:
    a request must name this server in ``Host`` (``host``, the address it is bound to, with
    ``port``, or ``localhost`` on loopback) and send no ``Origin`` or a matching one (:class:`HostCheck`).

    Raises:
        ConfigError: no ``token`` and no ``port`` (the check needs the port the server listens on).
    """
    if token is not None:
        authenticated = BearerAuth(_EndSessions(resumable_http_app(server, host=host), service), token)
        return HealthEndpoints(authenticated, service)  # a probe sends no token
    if port is None:
        raise ConfigError("http_app without a token needs the port it is served on (for the Host check)")
    allowed = allowed_hosts(host, port, scheme=scheme)
    mcp_app = resumable_http_app(server, host=host, transport_security=allowed.transport_security())
    return HostCheck(HealthEndpoints(_EndSessions(mcp_app, service), service), allowed)


class _EndSessions:
    """Close the kernel of an MCP session the client ended (``DELETE`` with its ``Mcp-Session-Id``)."""

    def __init__(self, app: ASGIApp, service: IpyboxService) -> None:
        self.app = app
        self.service = service

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("method") != "DELETE":
            await self.app(scope, receive, send)
            return
        header = MCP_SESSION_ID_HEADER.lower().encode()
        session = next((v.decode("latin-1") for k, v in scope.get("headers", ()) if k == header), None)
        status = 0

        async def watch(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        await self.app(scope, receive, watch)
        if session is not None and 200 <= status < 300:
            await self.service.close_session(f"mcp:{session}")


@contextlib.contextmanager
def _listen(host: str, port: int) -> Iterator[socket.socket]:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            # Accepted connections inherit it: a response written in parts must not wait for a
            # delayed ACK (~40 ms per request on a kept-alive connection).
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.bind((host, port))
            sock.listen(128)  # connections wait in the backlog until uvicorn accepts them
        except OSError as exc:
            raise ConfigError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
        yield sock


_REPEATING_LOGGERS = ("uvicorn.error", "asyncio", "mcp.server.transport_security")
"""Loggers whose lines a client without a token can cause (bad requests, refused connections,
descriptor exhaustion): each line is written once a minute at most, then counted."""


def listener_limits(header_timeout: float) -> ListenerLimits:
    """The HTTP listener's limits: ``header_timeout`` (:attr:`~.McpServerSettings.header_timeout`),
    and caps from this process's open-file limit (``descriptor_budget_limits``)."""
    return descriptor_budget_limits(header_timeout)


async def _serve_http(app: ASGIApp, sock: socket.socket, tls: Tls | None, *, header_timeout: float) -> None:
    from uvicorn.config import LOGGING_CONFIG

    limits = listener_limits(header_timeout)
    refusal = plain_refusal(
        f"ipybox MCP server: too many connections (at most {limits.max_connections} at once); try again"
    )
    listener = HttpListener(
        app,
        limits,
        refusal=refusal,
        lifespan=True,
        certfile=str(tls.certfile) if tls else None,
        keyfile=str(tls.keyfile) if tls else None,
        log_config=LOGGING_CONFIG,
        log_level="warning",
    )
    stopping = asyncio.Event()
    with _on_signals(stopping.set), repeats_limited(*_REPEATING_LOGGERS):
        await listener.start(sock)
        try:
            await stopping.wait()
        finally:
            await listener.stop(grace=5)


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


@contextlib.contextmanager
def _on_signals(callback: Callable[[], None]) -> Iterator[None]:
    """Call ``callback`` on SIGINT/SIGTERM/SIGHUP (main thread only); default handling afterwards."""
    loop = asyncio.get_running_loop()
    installed = []
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        try:
            loop.add_signal_handler(signum, callback)
        except (NotImplementedError, RuntimeError, ValueError):
            continue
        installed.append(signum)
    try:
        yield
    finally:
        for signum in installed:
            loop.remove_signal_handler(signum)
