"""One executor per conversation, made from a template: warm pool, idle timeout, live limit."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import inspect
import json
import logging
import os
import re
import shutil
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Unpack
from urllib.parse import parse_qs, urlsplit

from ipybox_core._safe_fs import SafeDir
from ipybox_core.codegen import GeneratedPackage, generate_server_package
from ipybox_core.errors import ConfigError, IpyboxError, UnknownToolError
from ipybox_core.executor import ExecutorOptions, SharedTools
from ipybox_core.executor.executor import (
    DEFAULT_CALL_TIMEOUT,
    DEFAULT_TIMEOUT,
    CodeExecutor,
    RegisteredServer,
)
from ipybox_core.hosttools import HOST_SERVER, HostTool, HostTools
from ipybox_core.hosttools._package import HOST_NAME_TAKEN, HOST_ROOT, combined_reference, write_host_package
from ipybox_core.kernel._stale_dirs import mark_owner
from ipybox_core.mcp import McpRegistry, McpServerConfig, load_mcp_config, parse_server_config
from ipybox_core.mcp.elicitation import ElicitationAnswer, ElicitationRequest
from ipybox_core.mcp.oauth_store import ConversationTokens, FileTokenStore, TokenStore
from ipybox_core.mcp.types import ToolInfo
from ipybox_core.sandbox._uids import in_range
from ipybox_core.sandbox.policy import resolve_sandbox
from ipybox_core.sessions._workspaces import WARM_PREFIX, WorkspaceRoot
from ipybox_core.toolserver import ToolCallOutcome

if TYPE_CHECKING:
    from ipybox_core.mcp.connection import McpConnection
    from ipybox_core.mcp.elicitation import Elicit
    from ipybox_core.mcp.oauth import AuthorizationRequest, Authorize

logger = logging.getLogger(__name__)

_PLACEHOLDER = re.compile(r"\$\{[A-Za-z_][A-Za-z0-9_]*(?::-[^}]*)?\}")
_REMEMBERED_ENDS = 100_000  # keys whose closed kernel is remembered for the restart notice
_NOT_TEMPLATE = ("workspace", "api_dir")
_GONE = "variables and imports from earlier code are gone (files in the workspace remain)"
EARLIER_PROCESS = "the process that ran it before, this application or the ipybox service, restarted since"
"""Why a conversation whose workspace an earlier process left has a fresh kernel."""
NOBODY_CALLING = "no conversation was calling the server when it asked"
SEVERAL_CALLING = (
    "{count} conversations were calling MCP server {server!r} when it asked, so ipybox cannot tell "
    "whose question it is (a question is shown only to the conversation that asked)"
)
"""Why a question of a shared MCP connection was declined: it is never shown to the wrong user."""
AUTHORIZE_MESSAGE = (
    "MCP server {server!r} needs your authorization to use your own account: open the URL (the call "
    "waits until the authorization server sends the browser back)"
)
"""The message of a conversation's authorization as a question of its execution (no ``mcp_authorize``)."""
NO_EXECUTION_TO_ASK = (
    "the first conversation lists the server's tools when its session is made, before an execution "
    "could show it the authorization: give Sessions mcp_authorize= (or a token stored for that "
    "conversation)"
)


class UnknownRedirect(IpyboxError, LookupError):
    """:meth:`Sessions.complete_authorization` got a redirect that no authorization waits for."""


class SessionLimitError(IpyboxError):
    """``max_sessions`` sessions are live and none is idle enough to be closed for a new one."""


class Session:
    """The executor of one conversation (``key``) and its workspace directory."""

    def __init__(self, key: str, executor: CodeExecutor, notice: str | None) -> None:
        self.key = key
        self.executor = executor
        self._notice = notice
        self._last_use = time.monotonic()
        self._timer: asyncio.TimerHandle | None = None
        self._holds = 0

    @property
    def in_use(self) -> bool:
        """True while code runs or waits for approval, or while the session is held (:meth:`hold`)."""
        return self._holds > 0 or self.executor.busy

    @contextlib.contextmanager
    def hold(self) -> Iterator[Session]:
        """Keep the session from being closed as idle or evicted while the block runs (e.g. while
        an MCP server is registered in it); the end of the block counts as its last use."""
        self._holds += 1
        try:
            yield self
        finally:
            self._holds -= 1
            self._last_use = time.monotonic()

    @property
    def workspace(self) -> Path:
        """The session's working directory, ``<root>/<keyed hash of key>``; kept when the session
        closes."""
        return self.executor.workspace

    def take_restart_notice(self) -> str | None:
        """Once, a sentence for the model when this conversation had a kernel that was closed (idle
        timeout, :meth:`Sessions.close_session`, eviction) and this session is its replacement."""
        notice, self._notice = self._notice, None
        return notice

    def __repr__(self) -> str:
        return f"Session(key={self.key!r}, workspace={str(self.workspace)!r})"


class _OwnRegistry(McpRegistry):
    """A session's own MCP connections: per-session servers, and the conversation's ``accounts`` (a
    connection per server whose OAuth ``account`` is ``"conversation"``, connected on first use)."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.accounts: dict[str, McpConnection] = {}

    async def aclose(self) -> None:
        accounts, self.accounts = list(self.accounts.values()), {}
        await asyncio.gather(*(connection.aclose() for connection in accounts))
        await super().aclose()


@dataclasses.dataclass(frozen=True)
class _Redirect:
    """A conversation's authorization waiting for its browser's redirect, and its question."""

    redirect: asyncio.Future[str]
    question: ElicitationRequest


class _Router:
    """The tool server's backend: the conversation's own connections first, then the shared ones.

    It knows its conversation (``key``, once its executor is a session's) and how many calls of
    each server run through it, so a shared connection's question goes to the conversation asking.
    """

    def __init__(
        self,
        own: _OwnRegistry,
        shared: McpRegistry,
        listed: Mapping[str, Mapping[str, ToolInfo]],
        *,
        authorize: Authorize | None,
        elicit: Elicit | None,
        redirects: dict[str, _Redirect],
    ) -> None:
        self.own = own
        self._redirects = redirects
        self._shared = shared
        self._listed = listed
        self._authorize = authorize
        self._elicit = elicit
        self.key: str | None = None
        self.executor: CodeExecutor | None = None
        self.calling: dict[str, int] = {}
        """Server -> calls of this conversation running now."""
        self.listing = False
        """True while the conversation connects when its session is made (no execution yet)."""

    def _registry(self, server: str) -> McpRegistry:
        return self.own if server in self.own.servers else self._shared

    def tool(self, server: str, tool: str) -> ToolInfo:
        account = self.own.accounts.get(server)
        if account is None:
            return self._registry(server).tool(server, tool)
        if account.tools:  # this conversation has connected: its own listing
            return account.tool(tool)
        listed = self._listed.get(server, {})  # not yet: the listing the API was generated from
        if tool not in listed:
            known = ", ".join(sorted(listed)) or "none"
            raise UnknownToolError(f"MCP server {server!r} has no tool {tool!r} (tools: {known})")
        return listed[tool]

    async def call(self, server: str, tool: str, arguments: dict[str, Any]) -> ToolCallOutcome:
        self.calling[server] = self.calling.get(server, 0) + 1
        try:
            account = self.own.accounts.get(server)
            if account is not None:  # connects (and authorizes this conversation) on first use
                return await account.call(tool, arguments)
            return await self._registry(server).call(server, tool, arguments)
        finally:
            self.calling[server] -= 1
            if not self.calling[server]:
                del self.calling[server]

    async def authorize(self, request: AuthorizationRequest) -> str:
        """The authorization of this conversation's user: the application's ``mcp_authorize``, else
        a question of the conversation's running execution whose redirect comes back through
        :meth:`Sessions.complete_authorization`."""
        request = dataclasses.replace(request, conversation=self.key)
        if self._authorize is not None:
            return await self._authorize(request)
        from ipybox_core.mcp.oauth import AuthorizationDeclined, NoAuthorizer

        if self.listing or self.executor is None:
            raise NoAuthorizer(NO_EXECUTION_TO_ASK)
        state = _state_of(request.url)
        question = ElicitationRequest(
            server=request.server,
            tool=None,
            message=AUTHORIZE_MESSAGE.format(server=request.server),
            schema={},
            url=request.url,
            conversation=self.key,
        )
        redirect: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self._redirects[state] = _Redirect(redirect, question)
        asking = asyncio.ensure_future(self.executor.ask_in_execution(question))
        try:
            either: set[asyncio.Future[Any]] = {redirect, asking}
            await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
            if not redirect.done():
                answer = asking.result()
                if answer.action != "accept":
                    why = f": {answer.reason}" if answer.reason else ""
                    raise AuthorizationDeclined(f"{answer.action}{why}")
                return await redirect  # the user agreed: the browser is on its way back
            return redirect.result()
        finally:
            self._redirects.pop(state, None)
            asking.cancel()

    async def ask(self, question: ElicitationRequest) -> ElicitationAnswer:
        """A question during this conversation's call: the application's ``mcp_elicit``, else an
        event of the conversation's running execution (as in a single ``CodeExecutor``)."""
        question = dataclasses.replace(question, conversation=self.key)
        if self._elicit is not None:
            return await self._elicit(question)
        if self.executor is None:
            return ElicitationAnswer("decline", reason=NOBODY_CALLING)
        return await self.executor.ask_in_execution(question)


class Sessions:
    """Executors per conversation key, made from one template.

    ``async with Sessions(mcp_servers=..., approval=..., sandbox=True) as sessions:`` then
    ``session = await sessions.session(thread_id)`` gives the conversation's live
    :class:`Session` (its :class:`CodeExecutor` and workspace), making one when there is none.

    ``executor_options`` are what :class:`CodeExecutor` takes (``mcp_servers``, ``approval``,
    ``sandbox``, ``timeout``, ``kernel_env``, ``kernel_gateway``, ...) except ``workspace`` and
    ``api_dir``: each session works in ``<root>/<name>`` (``root`` default: a private temporary
    directory removed by :meth:`aclose`; a given root and its workspaces are kept), where the name
    is an HMAC of the key under a secret kept in the root: names do not reveal keys. The root must
    be the application's own (writable by no one else) and is never shown to a kernel: each kernel
    sees its own workspace only. A root application's sandboxed kernels each run as their own uid
    (``SandboxPolicy.sandbox_uids``): per-user kernel quotas are per conversation.

    The MCP servers are connected once and their Python API generated once, into a directory
    every session reads (read-only in a sandbox). A server whose config uses ``${VAR}``
    placeholders gets a connection per session when ``session_env`` is given: the placeholders
    are filled from ``session_env(key)`` over ``mcp_env`` (default: the host's environment).
    A server whose OAuth config says ``"account": "conversation"`` gets a connection per
    conversation with the conversation's own tokens (in ``mcp_token_store``): each conversation's
    user authorizes at its first call, through ``mcp_authorize`` with
    :attr:`~ipybox_core.mcp.oauth.AuthorizationRequest.conversation` set to the key, or without
    it as a URL-mode question of the conversation's execution, completed by
    :meth:`complete_authorization` (the first conversation authorizes when its session is made: its
    listing is the generated API; it needs ``mcp_authorize`` or a stored token). An MCP server's
    question during a conversation's call is an event of that conversation's execution (or goes to
    ``mcp_elicit``, with the conversation's key); a question of a shared connection while several
    conversations call it is declined, never shown to a user it may not belong to.

    ``warm`` executors are kept started (kernel, tool server, sandbox) without a key: a new
    session takes one and another starts in the background. A session with no execution running
    or waiting for approval (and not held: :meth:`Session.hold`) for ``idle_timeout`` seconds is
    closed (kernel stopped, workspace kept); at most ``max_sessions`` are live: a new one closes
    the longest-idle session, or raises :class:`SessionLimitError` when every live session is in
    use.
    """

    def __init__(
        self,
        *,
        root: str | os.PathLike[str] | None = None,
        warm: int = 2,
        max_sessions: int = 100,
        idle_timeout: float | None = 900.0,
        session_env: Callable[[str], Mapping[str, str]] | None = None,
        **executor_options: Unpack[ExecutorOptions],
    ) -> None:
        for name in _NOT_TEMPLATE:
            if name in executor_options:
                raise ConfigError(
                    f"Sessions makes each session's {name} itself (under root=); leave {name}= out"
                )
        try:  # a misspelt option fails here, not in the first kernel's start
            inspect.signature(CodeExecutor).bind(**executor_options)
        except TypeError as exc:
            raise ConfigError(f"Sessions passes these options to CodeExecutor: {exc}") from None
        if warm < 0 or max_sessions < 1:
            raise ConfigError(f"warm must be >= 0 and max_sessions >= 1, got {warm} and {max_sessions}")
        if idle_timeout is not None and not idle_timeout > 0:
            raise ConfigError(f"idle_timeout must be a positive number of seconds or None: {idle_timeout}")
        self._root_arg = Path(root).absolute() if root is not None else None
        self._root: Path | None = None
        self._workspaces: WorkspaceRoot | None = None
        self.warm = warm
        self.max_sessions = max_sessions
        self.idle_timeout = idle_timeout
        self._session_env = session_env
        self._options: dict[str, Any] = dict(executor_options)
        self._host_tools = HostTools(self._options.get("host_tools", ()))
        self._options["host_tools"] = list(self._host_tools)
        self._host_package: GeneratedPackage | None = None  # for the reference only
        self._servers_option = self._options.pop("mcp_servers", None)
        self._mcp_env: Mapping[str, str] | None = self._options.get("mcp_env")
        policy = resolve_sandbox(self._options.get("sandbox", False))
        self._sandbox_uids = (
            (policy.sandbox_uid, policy.sandbox_uids)
            if policy is not None and policy.sandbox_uid is not None
            else None
        )
        timeout = self._options.get("timeout", DEFAULT_TIMEOUT)
        call_timeout = self._options.get("call_timeout")
        if call_timeout is None:
            call_timeout = DEFAULT_CALL_TIMEOUT if timeout is None else min(DEFAULT_CALL_TIMEOUT, timeout / 2)
        self._connect_timeout: float = self._options.get("connect_timeout", 30.0)
        self._call_timeout: float = call_timeout
        self._authorize: Authorize | None = self._options.get("mcp_authorize")
        self._elicit: Elicit | None = self._options.get("mcp_elicit")
        self._token_store: TokenStore | None = self._options.get("mcp_token_store")
        self._registry = McpRegistry(
            connect_timeout=self._connect_timeout,
            call_timeout=call_timeout,
            environ=self._mcp_env,
            authorize=self._authorize,
            token_store=self._token_store,
            elicit=self._route_question,
        )
        self._api_dir: Path | None = None
        self._api_root: Path | None = None
        self._servers: dict[str, RegisteredServer] = {}
        self._per_session: dict[str, Mapping[str, Any] | McpServerConfig] = {}
        self._per_account: dict[str, McpServerConfig] = {}  # "account": "conversation" servers
        self._listed: dict[str, dict[str, ToolInfo]] = {}  # their tools, as the API was generated
        self._redirects: dict[str, _Redirect] = {}  # OAuth state -> the authorization waiting for it
        self._generating = asyncio.Lock()
        self._live: dict[str, Session] = {}
        self._ended: dict[str, str] = {}  # key -> why its last kernel was closed
        self._key_locks: dict[str, list[Any]] = {}  # key -> [lock, users]
        self._session_of: dict[int, Session] = {}  # id(executor) -> its live session
        self._pending = 0  # sessions being made (they count against max_sessions)
        self._ready: list[CodeExecutor] = []
        self._starting: set[asyncio.Task[None]] = set()
        self._closing: set[asyncio.Task[None]] = set()
        self._warm_error: BaseException | None = None
        self._state = "new"

    # --- lifecycle --------------------------------------------------------------------------

    async def __aenter__(self) -> Sessions:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def start(self) -> None:
        """Connect the shared MCP servers, generate their API and fill the warm pool."""
        if self._state != "new":
            raise RuntimeError("Sessions can be started once")
        self._state = "starting"
        try:
            if self._root_arg is None:
                self._root = Path(tempfile.mkdtemp(prefix="ipybox-sessions-")).resolve()
                mark_owner(self._root)
            else:
                self._root = self._root_arg
            self._workspaces = await asyncio.to_thread(
                WorkspaceRoot.open, self._root, legacy_names=self._root_arg is not None
            )
            self._root = self._workspaces.path
            self._api_dir = Path(tempfile.mkdtemp(prefix="ipybox-api-")).resolve()
            mark_owner(self._api_dir)
            # api/ (0755 by the umask, unlike the 0700 temp dir): a sandbox's unprivileged uid reads it
            self._api_root = self._api_dir / "api" / self._options.get("api_package", "mcptools")
            self._api_root.mkdir(parents=True)
            if self._host_tools and HOST_SERVER in self._server_configs():
                raise ConfigError(HOST_NAME_TAKEN)
            await self._write_host_reference()
            for name, config in self._server_configs().items():
                if self._session_env is not None and _has_placeholders(config):
                    parse_server_config(name, config, environ=_EVERYTHING)  # valid apart from values
                    self._per_session[name] = config
                    continue
                parsed = parse_server_config(name, config, environ=self._mcp_env)
                if _per_conversation(parsed):  # connected by each conversation, on first use
                    self._per_account[name] = parsed
                    continue
                tools = await self._registry.add(name, config)
                await self._generate(name, self._registry.connection(name).config, tools)
            await asyncio.gather(*(self._start_warm() for _ in range(self.warm)))
            if self._warm_error is not None and self.warm and not self._ready:
                raise self._warm_error
        except BaseException:
            await self.aclose()
            raise
        self._state = "running"

    async def aclose(self) -> None:
        """Close every session and warm executor, the shared MCP connections, and ``root`` when it
        is the private default (a given root keeps the workspaces)."""
        if self._state == "closed":
            return
        self._state = "closed"
        for task in list(self._starting):
            task.cancel()
        await asyncio.gather(*self._starting, return_exceptions=True)
        live, self._live = list(self._live.values()), {}
        ready, self._ready = self._ready, []
        for session in live:
            if session._timer is not None:
                session._timer.cancel()
        await asyncio.gather(
            *(session.executor.aclose() for session in live),
            *(executor.aclose() for executor in ready),
            *self._closing,
            return_exceptions=True,
        )
        await self._registry.aclose()
        if self._api_dir is not None:
            shutil.rmtree(self._api_dir, ignore_errors=True)
        if self._workspaces is not None:
            await asyncio.to_thread(self._remove_root, [executor.workspace for executor in ready])

    # --- sessions ---------------------------------------------------------------------------

    @property
    def live(self) -> int:
        """How many sessions have a running executor."""
        return len(self._live)

    def __contains__(self, key: object) -> bool:
        """True if ``key`` has a live session."""
        return key in self._live

    def keys(self) -> list[str]:
        """The keys of the live sessions."""
        return list(self._live)

    @property
    def shares_kernel(self) -> bool:
        """False: each conversation key has its own kernel."""
        return False

    async def session(self, key: str) -> Session:
        """The live session of ``key``, or a new one (from the warm pool when one is ready).

        Raises:
            SessionLimitError: ``max_sessions`` are live and each is running or waiting for approval.
        """
        self._check_running()
        session = self._live.get(key)
        if session is not None:
            session._last_use = time.monotonic()
            return session
        async with self._key_lock(key):
            session = self._live.get(key)
            if session is None:
                session = await self._make(key)
        session._last_use = time.monotonic()
        return session

    async def close_session(self, key: str) -> None:
        """Close the session of ``key`` (its kernel; the workspace stays). Its next session gets a
        restart notice. Nothing happens for a key without a live session."""
        async with self._key_lock(key):
            await self._close(key, "it was closed by the application")

    async def complete_authorization(self, redirect_url: str) -> None:
        """Complete a conversation's OAuth authorization with the URL its user's browser was sent
        back to (``redirect_uri?code=...&state=...``, received by the application's own route), when
        ``Sessions`` has no ``mcp_authorize``: the authorization was then a question (URL mode) of
        the conversation's execution, and the call that waits for it goes on.

        Raises:
            UnknownRedirect: no authorization waits for this redirect (its ``state`` is not one
                ipybox sent, or that authorization ended: answered, declined or timed out).
        """
        waiting = self._redirects.get(_state_of(redirect_url))
        if waiting is None or waiting.redirect.done():
            raise UnknownRedirect(
                "no conversation's authorization waits for this redirect (unknown state, or that "
                "authorization ended); the user's next call asks again"
            )
        waiting.redirect.set_result(redirect_url)
        if waiting.question.pending:  # the question is answered by the redirect itself
            waiting.question.respond(ElicitationAnswer.accept())

    @property
    def servers(self) -> dict[str, RegisteredServer]:
        """The MCP servers every session shares, by name (a per-session server once connected)."""
        return dict(self._servers)

    def api_reference(self, servers: list[str] | None = None, *, max_chars: int | None = None) -> str:
        """Compact Python signatures of the tools every session can import, host tools included
        (see :meth:`CodeExecutor.api_reference`); a per-session server is listed once a session
        connected it."""
        names = servers if servers is not None else sorted(self._servers)
        packages = [
            self._servers[name].package for name in names if name != HOST_SERVER or name in self._servers
        ]
        host = self._host_package if servers is None or HOST_SERVER in servers else None
        package = (
            self._api_root.name
            if self._api_root is not None
            else self._options.get("api_package", "mcptools")
        )
        return combined_reference(packages, host, package=package, max_chars=max_chars)

    async def register_host_tools(self, tools: Iterable[HostTool]) -> None:
        """Use ``tools`` as every session's host tools from now on (see
        :meth:`CodeExecutor.register_host_tools`): live and warm executors at once, new ones
        from their start. Raises :class:`ConfigError` if an MCP server is named ``agent_tools``."""
        tools = list(tools)
        if tools and HOST_SERVER in self._servers:
            raise ConfigError(HOST_NAME_TAKEN)
        self._options["host_tools"] = tools
        self._host_tools.replace(tools)
        if self._api_dir is not None:
            await self._write_host_reference()
        executors = [session.executor for session in self._live.values()] + list(self._ready)
        await asyncio.gather(*(executor.register_host_tools(tools) for executor in executors))

    async def _write_host_reference(self) -> None:
        assert self._api_dir is not None
        root = self._api_dir / HOST_ROOT
        self._host_package = await asyncio.to_thread(write_host_package, self._host_tools, root)

    # --- internals --------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def _key_lock(self, key: str) -> AsyncIterator[None]:
        """One making or closing at a time per key (a key's lock lives while someone uses it)."""
        entry = self._key_locks.get(key)
        if entry is None:
            entry = self._key_locks[key] = [asyncio.Lock(), 0]
        entry[1] += 1
        try:
            async with entry[0]:
                yield
        finally:
            entry[1] -= 1
            if entry[1] == 0:
                del self._key_locks[key]

    def _check_running(self) -> None:
        if self._state != "running":
            raise RuntimeError(
                "Sessions is closed"
                if self._state == "closed"
                else "use `async with Sessions(...)` or start()"
            )

    async def _make(self, key: str) -> Session:
        await self._make_room()
        self._pending += 1
        executor: CodeExecutor | None = None
        try:
            executor = self._ready.pop(0) if self._ready else None
            self._refill()
            if executor is None:
                executor = await self._new_executor()
            assert self._workspaces is not None
            left_by_earlier_process = await asyncio.to_thread(
                self._workspaces.move_into_place,
                key,
                executor.workspace,
                executor.move_workspace,
                taken_from=self._is_sandbox_uid,
            )
            router = _router_of(executor)
            router.key = key
            if self._per_session:
                await self._connect_own(key, executor)
            if self._per_account:
                await self._connect_accounts(key, executor, self._per_account)
        except BaseException:
            self._pending -= 1
            if executor is not None:
                await asyncio.shield(executor.aclose())
                await asyncio.shield(asyncio.to_thread(self._remove_warm, executor.workspace))
            raise
        self._pending -= 1
        if self._state != "running":  # closed meanwhile
            await executor.aclose()
            self._check_running()
        reason = self._ended.pop(key, None)
        if reason is None and left_by_earlier_process:
            reason = EARLIER_PROCESS
        notice = None
        if reason is not None:
            notice = f"the Python kernel of this conversation was restarted ({reason}): {_GONE}"
        session = Session(key, executor, notice)
        self._live[key] = session
        self._session_of[id(executor)] = session
        self._arm(session, self.idle_timeout)
        return session

    async def _make_room(self) -> None:
        """Close the longest-idle session when the limit is reached, or raise SessionLimitError."""
        if len(self._live) + self._pending < self.max_sessions:
            return
        idle = [s for s in self._live.values() if not s.in_use and s.key not in self._key_locks]
        if not idle:
            raise SessionLimitError(
                f"all {self.max_sessions} sessions (max_sessions) are running code or waiting for "
                "approval; raise max_sessions, lower idle_timeout, or close sessions you no longer need"
            )
        victim = min(idle, key=lambda s: s._last_use)
        await self._close(victim.key, "it was closed to make room for other conversations")

    async def _close(self, key: str, reason: str) -> None:
        session = self._live.pop(key, None)
        if session is None:
            return
        self._session_of.pop(id(session.executor), None)
        if session._timer is not None:
            session._timer.cancel()
        self._remember_end(key, reason)
        task = asyncio.ensure_future(session.executor.aclose())
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)
        await asyncio.shield(task)

    def _remember_end(self, key: str, reason: str) -> None:
        self._ended.pop(key, None)
        self._ended[key] = reason
        while len(self._ended) > _REMEMBERED_ENDS:
            del self._ended[next(iter(self._ended))]

    # idle timeout: a timer per session, moved forward by use

    def _arm(self, session: Session, delay: float | None) -> None:
        if delay is None:
            return
        loop = asyncio.get_running_loop()
        session._timer = loop.call_later(max(delay, 0.0), self._idle_check, session)

    def _idle_check(self, session: Session) -> None:
        session._timer = None
        if self._live.get(session.key) is not session or self.idle_timeout is None:
            return
        if session.in_use or session.key in self._key_locks:
            self._arm(session, self.idle_timeout)  # in use now; its end counts as the last use
            return
        remaining = session._last_use + self.idle_timeout - time.monotonic()
        if remaining > 0:
            self._arm(session, remaining)
            return
        task = asyncio.ensure_future(self._close_idle(session.key))
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    async def _close_idle(self, key: str) -> None:
        async with self._key_lock(key):
            session = self._live.get(key)
            if session is None or session.in_use:
                return
            assert self.idle_timeout is not None
            if session._last_use + self.idle_timeout > time.monotonic():
                self._arm(session, session._last_use + self.idle_timeout - time.monotonic())
                return
            await self._close(key, f"after {self.idle_timeout:g} s idle")

    def _used(self, executor: CodeExecutor) -> None:
        session = self._session_of.get(id(executor))
        if session is not None:
            session._last_use = time.monotonic()

    # the warm pool

    def _refill(self) -> None:
        if self._state not in ("running", "starting"):
            return
        for _ in range(self.warm - len(self._ready) - len(self._starting)):
            task = asyncio.ensure_future(self._start_warm())
            self._starting.add(task)
            task.add_done_callback(self._starting.discard)

    async def _start_warm(self) -> None:
        try:
            executor = await self._new_executor()
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # reported by start(); a later acquire starts one itself
            logger.warning("could not start a warm executor: %s", exc)
            self._warm_error = exc
            return
        if self._state in ("running", "starting"):
            self._ready.append(executor)
        else:
            await executor.aclose()
            await asyncio.to_thread(self._remove_warm, executor.workspace)

    async def _new_executor(self) -> CodeExecutor:
        """A started executor with the shared tools, in a fresh directory ``<root>/.warm-*``."""
        assert self._workspaces is not None
        assert self._api_root is not None
        workspace = self._workspaces.new_warm()
        own = _OwnRegistry(
            connect_timeout=self._connect_timeout,
            call_timeout=self._call_timeout,
            authorize=self._authorize,
            token_store=self._token_store,
        )
        router = _Router(
            own,
            self._registry,
            self._listed,
            authorize=self._authorize,
            elicit=self._elicit,
            redirects=self._redirects,
        )
        own.elicit = router.ask
        shared = SharedTools(
            backend=router,
            registry=own,
            servers=self._servers,
            api_root=self._api_root,
            finished=self._used,
        )
        executor = CodeExecutor(workspace=workspace, shared_tools=shared, **self._options)
        router.executor = executor
        try:
            await executor.start()
            if executor.host_tools != self._options["host_tools"]:  # replaced while it started
                await executor.register_host_tools(self._options["host_tools"])
        except BaseException:
            await executor.aclose()
            await asyncio.shield(asyncio.to_thread(self._remove_warm, workspace))
            raise
        return executor

    def _remove_warm(self, workspace: Path) -> None:
        """Remove a warm executor's directory (never a session's workspace: those are kept)."""
        if (
            self._workspaces is not None
            and workspace.parent == self._workspaces.path
            and workspace.name.startswith(WARM_PREFIX)
        ):
            self._workspaces.remove(workspace.name)

    def _remove_root(self, warm: list[Path]) -> None:
        """The warm executors' directories, and the root itself when it is the private default."""
        assert self._workspaces is not None
        assert self._root is not None
        for workspace in warm:
            self._remove_warm(workspace)
        self._workspaces.close()
        if self._root_arg is None:
            with contextlib.suppress(OSError), SafeDir.open(self._root.parent) as parent:
                parent.remove_tree(self._root.name)

    def _is_sandbox_uid(self, uid: int) -> bool:
        """Whether ``uid`` is one the template's sandboxed kernels run as (their files may be given
        to the next kernel of the same conversation)."""
        return self._sandbox_uids is not None and in_range(uid, *self._sandbox_uids)

    # per-session MCP connections

    async def _connect_own(self, key: str, executor: CodeExecutor) -> None:
        assert self._session_env is not None
        assert executor.shared_tools is not None
        base = os.environ if self._mcp_env is None else self._mcp_env
        environ = {**base, **self._session_env(key)}
        own = executor.shared_tools.registry
        accounts: dict[str, McpServerConfig] = {}
        for name, config in self._per_session.items():
            parsed = parse_server_config(name, config, environ=environ)
            if _per_conversation(parsed):
                accounts[name] = parsed
                continue
            tools = await own.add(name, parsed)
            registered = self._servers.get(name)
            if registered is None:
                registered = await self._generate(name, parsed, tools)
            executor.attach_server(registered)
        if accounts:
            await self._connect_accounts(key, executor, accounts)

    async def _connect_accounts(
        self, key: str, executor: CodeExecutor, configs: Mapping[str, McpServerConfig]
    ) -> None:
        """The conversation's own connections to servers with ``"account": "conversation"``: its own
        tokens and authorization, connected on its first call (the first conversation connects at
        once: its listing is the API every conversation imports)."""
        from ipybox_core.mcp.connection import McpConnection

        router = _router_of(executor)
        if self._token_store is None:
            self._token_store = FileTokenStore()
        for name, config in configs.items():
            connection = McpConnection(
                name,
                config,
                connect_timeout=self._connect_timeout,
                call_timeout=self._call_timeout,
                authorize=router.authorize,
                token_store=ConversationTokens(self._token_store, key),
                elicit=router.ask,
                sample=self._options.get("mcp_sample"),
                roots=self._options.get("mcp_roots"),
            )
            router.own.accounts[name] = connection
            registered = self._servers.get(name)
            if registered is None:
                router.listing = True
                try:
                    tools = await connection.connect()
                finally:
                    router.listing = False
                self._listed[name] = {tool.name: tool for tool in tools}
                registered = await self._generate(name, config, tools)
            executor.attach_server(registered)

    async def _route_question(self, question: ElicitationRequest) -> ElicitationAnswer:
        """A shared connection's question: to the one conversation calling that server, else declined."""
        routers = [_router_of(session.executor) for session in self._live.values()]
        calling = [router for router in routers if router.calling.get(question.server)]
        if len(calling) == 1:
            return await calling[0].ask(question)
        reason = (
            SEVERAL_CALLING.format(count=len(calling), server=question.server) if calling else NOBODY_CALLING
        )
        return ElicitationAnswer("decline", reason=reason)

    async def _generate(self, name: str, config: McpServerConfig, tools: list[ToolInfo]) -> RegisteredServer:
        assert self._api_root is not None
        async with self._generating:
            registered = self._servers.get(name)
            if registered is None:
                package = await asyncio.to_thread(generate_server_package, name, tools, self._api_root)
                registered = RegisteredServer(name=name, config=config, package=package)
                self._servers[name] = registered
            return registered

    def _server_configs(self) -> dict[str, Mapping[str, Any] | McpServerConfig]:
        servers = self._servers_option
        if servers is None:
            return {}
        if isinstance(servers, (str, os.PathLike)):
            return _raw_config_file(Path(servers), self._mcp_env)
        return dict(servers)


class _Everything(dict[str, str]):
    """An environment in which every variable is set (to check a config's shape only)."""

    def get(self, key: str, default: Any = None) -> str:
        return "x"


_EVERYTHING = _Everything()


def _router_of(executor: CodeExecutor) -> _Router:
    assert executor.shared_tools is not None
    router = executor.shared_tools.backend
    assert isinstance(router, _Router)
    return router


def _state_of(url: str) -> str:
    """The OAuth ``state`` of an authorization URL or a redirect (``""`` without one)."""
    return (parse_qs(urlsplit(url).query).get("state") or [""])[0]


def _per_conversation(config: McpServerConfig) -> bool:
    """Whether each conversation authorizes its own account on this server."""
    auth = getattr(config, "auth", None)
    return auth is not None and auth.account == "conversation"


def _has_placeholders(config: Mapping[str, Any] | McpServerConfig) -> bool:
    raw = config.model_dump() if isinstance(config, McpServerConfig) else config
    return bool(_PLACEHOLDER.search(json.dumps(raw, default=str)))


def _raw_config_file(
    path: Path, environ: Mapping[str, str] | None
) -> dict[str, Mapping[str, Any] | McpServerConfig]:
    """The server configs of an MCP config file with their placeholders unfilled."""
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
        servers = document.get("mcpServers", document.get("servers"))
        return {
            name: config
            for name, config in servers.items()
            if isinstance(config, dict) and config.get("disabled") is not True
        }
    except (OSError, ValueError, AttributeError):
        return dict(load_mcp_config(path, environ=environ))  # raises the ConfigError that explains it


__all__ = ["Session", "SessionLimitError", "Sessions", "UnknownRedirect"]
