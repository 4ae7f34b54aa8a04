"""The code executors behind the MCP server: one per client session, started in the background,
closed with the session or the server.

Over stdio there is one client and one kernel (the *default* session), working in the workspace.
Over Streamable HTTP each MCP session gets its own kernel, workspace and registered servers
(:meth:`IpyboxService.session` with the session's key) from a :class:`~ipybox_core.sessions.Sessions`:
a warm pool of started kernels, the config servers connected once and shared, ``max_sessions`` live
at most, and a session idle for ``idle_timeout`` seconds loses its kernel (its next ``execute_code``
is told so). The clients without a session share the default session, which over HTTP is one of
those sessions (key :data:`DEFAULT_SESSION`): its workspace lies beside the others, never around
them. The sessions' root, ``<workspace>/.ipybox-sessions/run-*``, is made fresh by each start,
belongs to the host (mode 0700) and is shown to no kernel.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import os
import secrets
import sys
import time
from collections import OrderedDict
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from ipybox_core import protocol
from ipybox_core._ended_calls import EndedCalls
from ipybox_core._safe_fs import SafeDir, anchored
from ipybox_core.approval.policy import ApprovalPolicy, NarrowedPolicy
from ipybox_core.approval.request import CONVERSATION_MOVED_ON, SHUTDOWN
from ipybox_core.errors import ConfigError, ExecutionCancelled, ExecutionGone, IpyboxError
from ipybox_core.mcp.config import McpServerConfig, load_mcp_config, parse_server_config
from ipybox_core.mcp_server._host_calls import HandedCall, HostCalls
from ipybox_core.mcp_server._parked import ParkedExecutions
from ipybox_core.mcp_server._suspended import SuspendedExecution
from ipybox_core.mcp_server.environment import Environment, load_environment
from ipybox_core.mcp_server.health import Readiness
from ipybox_core.mcp_server.inbox import AnsweredCall, AnsweredCalls
from ipybox_core.mcp_server.settings import McpServerSettings
from ipybox_core.sandbox.policy import resolve_sandbox

if TYPE_CHECKING:
    from ipybox_core.codegen import GeneratedPackage
    from ipybox_core.executor import CodeExecutor
    from ipybox_core.executor.executor import RegisteredServer
    from ipybox_core.sessions import Session, Sessions

SESSIONS_DIR = ".ipybox-sessions"
"""Under the workspace (Streamable HTTP): ``run-*``, one host-only directory per start of the server,
holding one working directory per client session."""
RUN_PREFIX = "run-"
RESTARTED_NOTICE = (
    "the Python kernel of this conversation was restarted (the ipybox service restarted): variables, "
    "imports and the files its code wrote in its workspace are gone"
)
ENDED_FILE = "ended-calls.json"
"""Under ``<workspace>/.ipybox-sessions``: why the calls that no longer wait ended and which
conversations had a kernel, saved by a graceful stop for the next start."""
DEFAULT_SESSION = "default"
"""Over Streamable HTTP, the key of the session of the clients that name none (keys of named
sessions always have a ``mcp:`` or ``named:`` prefix)."""
_FORGET_WORKSPACES_AFTER = 10_000
_DIRECTORY_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


class ExecutorUnavailable(IpyboxError):
    """The kernel (or the sandbox around it) could not be started."""


class ServerStartFailed(IpyboxError):
    """A config MCP server could not start while the service requires every one (``--require-servers``)."""


class TooManySessions(IpyboxError):
    """``max_sessions`` client sessions have a kernel, each running code or waiting for approval."""


@dataclass(frozen=True)
class ParkedCall:
    """What a parked ``execute_code`` needs again on resume."""

    session: str | None
    """The key of the session that started it: only that session can resume it."""
    max_chars: int
    call: str | None = None
    """The call id the client chose for this ``execute_code`` (if it gave one)."""
    client: str | None = None
    """The client name of the process whose round asked (``ipybox.dev/client``), for the inbox."""
    host_calls: HostCalls | None = None
    """The session's agent tools, whose calls the execution hands to the client."""
    host_call: HandedCall | None = None
    """The call of an agent tool it is parked at (``None``: parked at an approval)."""


@dataclass(eq=False)
class ClientSession:
    """One client's kernel: its executor, its workspace and the config servers that failed."""

    key: str | None
    """``None`` for the default session (stdio, or HTTP clients without a session)."""
    workspace: Path
    executor: CodeExecutor | None = None
    startup_failures: dict[str, str] = field(default_factory=dict)
    error: BaseException | None = None
    ready: asyncio.Event = field(default_factory=asyncio.Event)
    last_used: float = field(default_factory=time.monotonic)
    restart_notice: str | None = None
    pooled: Session | None = None
    """The :class:`~ipybox_core.sessions.Session` behind a keyed session."""
    host_calls: HostCalls = field(default_factory=HostCalls)
    """The agent tools its application sent, and their calls that wait for the application."""

    @contextlib.contextmanager
    def hold(self) -> Iterator[ClientSession]:
        """Keep a keyed session's kernel from being closed as idle while a tool works in it."""
        with self.pooled.hold() if self.pooled is not None else contextlib.nullcontext():
            yield self

    def take_restart_notice(self) -> str | None:
        """The message that this session's earlier kernel was stopped (once), or ``None``."""
        notice, self.restart_notice = self.restart_notice, None
        return notice


@dataclass
class _OwnApi:
    """The API generated for a server a client session registered itself (``register_mcp_server``
    in a keyed session): every keyed session imports from one directory, so the sessions that
    registered the same name share its package, and a different server under that name is refused."""

    tools: str
    package: GeneratedPackage
    users: dict[str, CodeExecutor] = field(default_factory=dict)


class IpyboxService:
    """Owns the :class:`CodeExecutor` of each client session of the MCP server.

    :meth:`start` returns at once: the default session's kernel starts and the ``config`` servers
    are registered in the background while the MCP handshake proceeds; tools wait for
    :meth:`session`. A config server that fails to start is reported (``startup_failures``) and
    skipped. Over Streamable HTTP (``start(default_session=False)``) the :class:`Sessions` of the
    keyed sessions starts instead: it connects the config servers once for every keyed session and
    fills its warm pool (``warm_sessions`` started kernels).

    Configuration problems (an unreadable ``.env``, a malformed config file, an unset ``${VAR}``)
    are raised by the constructor, before anything starts.
    """

    def __init__(
        self,
        settings: McpServerSettings,
        *,
        environment: Environment | None = None,
        notify: Callable[[str], None] | None = None,
    ) -> None:
        self.settings = settings
        self.environment = environment or load_environment(settings.dotenv_path)
        self.server_configs: dict[str, McpServerConfig] = (
            load_mcp_config(settings.config, environ=self.environment.mcp_env)
            if settings.config is not None
            else {}
        )
        if not isinstance(settings.sandbox, bool) and not settings.sandbox.is_file():
            raise ConfigError(f"sandbox config file {str(settings.sandbox)!r} does not exist")
        self.sandbox = resolve_sandbox(settings.sandbox)  # a bad policy file fails here, at once
        # Executions waiting between the rounds of an InputRequiredResult exchange, by request
        # state, with the session that started them and the call's output limit.
        self.parked: ParkedExecutions[ParkedCall] = ParkedExecutions(
            abandon_after=settings.approval_timeout + 60.0,
            abandon_reason="nobody answered the approval request in time",
            expired=lambda parked, error: self.record_ended(parked.context, error),
        )
        # Why the calls that no longer wait ended (cancelled, expired, answered by whom, the
        # service stopped), for a resume that finds nothing; kept across a graceful restart.
        self.ended = EndedCalls()
        self._before_restart: set[str] = set()  # conversations that had a kernel before a restart
        # Executions answered from the approvals inbox, until their call's next round takes the outcome.
        self.answered = AnsweredCalls(keep_for=settings.approval_timeout + 60.0)
        self._notify = notify or _stderr
        self._default = ClientSession(None, settings.workspace)
        self._pool: Sessions | None = None  # the keyed sessions' kernels, once started
        self._pool_task: asyncio.Task[Sessions] | None = None
        self._pool_failures: dict[str, str] = {}  # config servers that failed for the keyed sessions
        self._pooled = False  # Streamable HTTP: the default session is one of the keyed sessions
        self._sessions_root: Path | None = None  # this run's host-only root of their workspaces
        self._clients: dict[str, ClientSession] = {}  # key → its session (the executor Sessions gave)
        self._workspaces: OrderedDict[str, Path] = OrderedDict()  # key → its working directory
        self._own_apis: dict[str, _OwnApi] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._started = False
        self._closing = False
        self._default_started = False

    async def __aenter__(self) -> IpyboxService:
        self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    def start(self, *, default_session: bool = True) -> None:
        """Start the default session's kernel, or (``default_session`` false: Streamable HTTP) the
        keyed sessions' warm pool, in the background; the other starts on first use."""
        if self._started:
            return
        self._started = True
        if default_session:
            self._start_default()
        else:
            self._pooled = True
            # what an earlier run left: why its calls ended, the conversations that had a kernel
            self._before_restart = set(self.ended.load(self.settings.workspace / SESSIONS_DIR, ENDED_FILE))
            self._start_pool()

    @property
    def startup_failures(self) -> dict[str, str]:
        """The config servers that failed to start in the default session."""
        return self._default.startup_failures

    @property
    def closing(self) -> bool:
        """True once :meth:`aclose` began."""
        return self._closing

    @property
    def ready(self) -> bool:
        return self._default.ready.is_set()

    def readiness(self) -> Readiness:
        """Whether the service can take conversations (``GET /readyz``): its kernels' pool (over
        Streamable HTTP; the default kernel over stdio) has started and every config MCP server is
        connected."""
        if self._closing:
            return Readiness(False, "shutting down")
        failed = {name: first_line(error) for name, error in self.failures().items()}
        if self._pooled:
            task = self._pool_task
            if self._pool is None and task is not None and task.done() and not task.cancelled():
                error = task.exception()
                if error is not None:
                    return Readiness(False, f"the kernels could not start: {first_line(str(error))}")
            started = self._pool is not None
        else:
            started = self.ready and self._default.error is None
        if failed:
            names = ", ".join(repr(name) for name in failed)
            return Readiness(False, f"MCP servers from the config file failed to start: {names}", failed)
        return Readiness(True) if started else Readiness(False, "starting")

    def failures(self) -> dict[str, str]:
        """The config MCP servers that failed to start, with the error (the keyed sessions' over
        Streamable HTTP, the default session's over stdio)."""
        return dict(self._pool_failures) if self._pooled else dict(self._default.startup_failures)

    async def require_servers(self) -> None:
        """Wait until the config MCP servers are connected (and the kernels started).

        Raises:
            ServerStartFailed: a config MCP server could not start (its name and the cause, on
                one line).
            ExecutorUnavailable: the kernel could not be started.
        """
        if self._pooled:
            await self._started_pool()
        else:
            await self.session(None)
        failed = self.failures()
        if failed:
            name, error = next(iter(failed.items()))  # the first one: one line
            raise ServerStartFailed(
                f"MCP server {name!r} from the config file failed to start: {first_line(error)}"
            )

    def unavailable_message(self, module: str) -> str | None:
        """The model's words for ``ModuleNotFoundError: No module named '<module>'`` when ``module``
        is the API of a config server that failed to start (``None`` otherwise)."""
        package = self.settings.api_dir.name if self.settings.api_dir is not None else "mcptools"
        head, _, name = module.partition(".")
        name = name.partition(".")[0]
        if head != package or not name:
            return None
        error = self.failures().get(name)
        if error is None:
            return None
        return f"MCP server {name!r} is not available: {first_line(error)}"

    @property
    def live_sessions(self) -> int:
        """Client sessions (other than the default one) that have a kernel."""
        return self._pool.live if self._pool is not None else 0

    async def executor(self) -> CodeExecutor:
        """The default session's running executor, once started."""
        executor = (await self.session(None)).executor
        assert executor is not None
        return executor

    async def session(self, key: str | None) -> ClientSession:
        """The session ``key`` (``None``: the default one) with a running executor.

        A session seen for the first time (or again after its kernel was closed: idle, or evicted
        to make room) gets a kernel from the warm pool, and its next result a restart notice. Over
        Streamable HTTP the default session is the keyed session :data:`DEFAULT_SESSION`.

        Raises:
            ExecutorUnavailable: the kernel could not be started (the message says why).
            TooManySessions: ``max_sessions`` sessions are live, each running code or waiting
                for approval.
        """
        if self._closing:
            raise ExecutorUnavailable("the ipybox MCP server is shutting down")
        if key is None and self._pooled:
            key = DEFAULT_SESSION
        if key is not None:
            return await self._keyed(key)
        session = self._default
        self._start_default()
        session.last_used = time.monotonic()
        await session.ready.wait()
        if session.executor is None or session.error is not None:
            raise ExecutorUnavailable(f"ipybox could not start its kernel: {session.error}")
        session.last_used = time.monotonic()
        return session

    async def reference_source(self, key: str | None) -> CodeExecutor | Sessions:
        """What lists the API of session ``key``'s servers: its executor when it has a kernel,
        otherwise the servers every keyed session shares (no kernel is started for the question)."""
        if key is None and not self._pooled:
            return await self.executor()
        key = DEFAULT_SESSION if key is None else key
        client = self._clients.get(key)
        pool = await self._started_pool()
        if client is not None and client.executor is not None and key in pool:
            return client.executor
        return pool

    async def close_session(self, key: str) -> None:
        """The client ended session ``key``: stop its executions, kernel and MCP servers, and
        remove its working directory."""
        await self.cancel_parked(key, "the session ended")
        self._clients.pop(key, None)
        if self._pool is not None:
            await self._pool.close_session(key)
        workspace = self._workspaces.pop(key, None)
        if workspace is not None:
            await asyncio.to_thread(self._remove_workspace, workspace)

    def record_ended(self, call: ParkedCall, error: BaseException) -> None:
        """The execution of ``call`` no longer waits because of ``error`` (a resume that finds
        nothing is told so)."""
        if call.call is not None:
            self.ended.record(_ended_key(call.session, call.call), error)

    def gone(self, session: str | None, call: str) -> ExecutionGone:
        """Why nothing waits for ``call`` in ``session``: its recorded cause, else "gone"."""
        return self.ended.get(_ended_key(session, call)) or ExecutionGone(protocol.GONE_MESSAGE)

    async def cancel_parked(
        self,
        key: str | None,
        reason: str,
        *,
        only: Collection[str] | None = None,
        keep: Collection[str] = (),
    ) -> int:
        """Cancel the executions of session ``key`` parked for an approval round, and those the
        approvals inbox answered that still run (those whose call id is in ``only`` if given; never
        those in ``keep``); an answered outcome nobody took yet is dropped. Returns how many."""

        def chosen_call(session: str | None, call: str | None) -> bool:
            return session == key and (only is None or call in only) and call not in keep

        def chosen(parked: SuspendedExecution[ParkedCall]) -> bool:
            return chosen_call(parked.context.session, parked.context.call)

        def chosen_answered(answered: AnsweredCall) -> bool:
            return chosen_call(answered.session, answered.call)

        for parked in self.parked.values():
            if chosen(parked):
                self.record_ended(parked.context, ExecutionCancelled(reason))
        cancelled = await self.parked.cancel_all(reason, where=chosen)
        # An answered execution parked again at its next approval was cancelled just now: counted once.
        return cancelled + await self.answered.cancel_all(reason, chosen_answered, CONVERSATION_MOVED_ON)

    async def aclose(self) -> None:
        """Cancel parked executions and stop every kernel and MCP server process."""
        self._closing = True
        tasks: list[asyncio.Task[Any]] = [*self._tasks]
        if self._pool_task is not None:
            tasks.append(self._pool_task)
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(BaseException):
                await task
        await self.answered.cancel_all("the ipybox MCP server is shutting down", lambda _: True, SHUTDOWN)
        stopped = self.parked.values()
        await self.parked.cancel_all("the ipybox MCP server is shutting down", decided_by=SHUTDOWN)
        for parked in stopped:  # a resume after the restart is told so
            self.record_ended(
                parked.context, ExecutionGone(protocol.SERVICE_RESTARTED_MESSAGE, cause="restarted")
            )
        keys = [key for key in self._clients if key != DEFAULT_SESSION]  # told of the restart next run
        if self._sessions_root is not None and (len(self.ended) or keys):
            with contextlib.suppress(OSError, IpyboxError):
                directory = self.settings.workspace / SESSIONS_DIR
                await asyncio.to_thread(self.ended.save, directory, ENDED_FILE, keys=keys)
        pool, self._pool = self._pool, None
        self._clients.clear()
        await asyncio.gather(
            self._stop(self._default), *([pool.aclose()] if pool is not None else []), return_exceptions=True
        )
        self._workspaces.clear()
        if self._sessions_root is not None:  # every session's workspace and the warm ones
            await asyncio.to_thread(_remove_tree, self._sessions_root)

    # --- internals -------------------------------------------------------------------------

    def _executor_options(self) -> dict[str, Any]:
        """What every kernel of the server is made with (but its workspace and API directory)."""
        settings = self.settings
        return {
            "api_package": settings.api_dir.name if settings.api_dir is not None else "mcptools",
            "sandbox": self.sandbox if self.sandbox is not None else False,
            # --yes: the policy lets every call through in the tool server (recorded as "policy"),
            # with no round through the execution's events: a call costs what approval="never" costs;
            # --approval-rules: what the rules decide never reaches the client either.
            "approval": self._approval(),
            "approval_timeout": settings.approval_timeout,
            "mcp_env": self.environment.mcp_env,
            "kernel_env": self.environment.kernel_env,
            "timeout": settings.timeout,
            "audit_log": settings.audit_log,
            "kernel_gateway": settings.kernel_gateway,
            "gateway_token": settings.gateway_token,
        }

    def _approval(self) -> ApprovalPolicy:
        """The service's own approval policy (``--yes``, ``--approval-rules``, or ask for every call)."""
        settings = self.settings
        return "never" if settings.auto_approve else (settings.approval_rules or "always")

    def narrow(self, session: ClientSession, rules: object) -> None:
        """Decide the next execution of ``session`` by the service's policy narrowed by the client's
        ``rules`` (``ipybox.dev/rules`` data; ``None``: the service's policy alone). Call it only
        while the session's executor is idle.

        Raises:
            ConfigError: ``rules`` are not valid approval rules (every problem named).
        """
        executor = session.executor
        assert executor is not None
        assert not executor.busy
        own = self._approval()
        executor.approval = own if rules is None else NarrowedPolicy(own, protocol.rules_from_data(rules))

    def _start_default(self) -> None:
        if not self._default_started:
            self._default_started = True
            self._tasks.append(asyncio.create_task(self._open(self._default), name="ipybox-start"))

    async def _open(self, session: ClientSession) -> None:
        """Start the default session's kernel in the workspace and register the config servers."""
        try:
            # Imported in a thread: the MCP handshake goes on meanwhile.
            module = await asyncio.to_thread(importlib.import_module, "ipybox_core.executor")
            session.executor = executor = module.CodeExecutor(
                workspace=session.workspace, api_dir=self.settings.api_dir, **self._executor_options()
            )
            await executor.start()
            for name, config in self.server_configs.items():
                try:
                    await executor.register_mcp_server(name, config)
                except IpyboxError as exc:
                    session.startup_failures[name] = str(exc)
                    self._notify(f"MCP server {name!r} from the config file failed to start: {exc}")
        except asyncio.CancelledError:
            session.error = ExecutorUnavailable("the ipybox MCP server is shutting down")
            raise
        except Exception as exc:
            session.error = exc
            self._notify(f"could not start the kernel: {exc}")
        finally:
            session.ready.set()

    async def _stop(self, session: ClientSession) -> None:
        await self.cancel_parked(session.key, "the session ended")
        if session.executor is not None:
            await session.executor.aclose()

    # the keyed sessions (Streamable HTTP)

    def _start_pool(self) -> None:
        if self._pool_task is None and not self._closing:
            self._pool_task = asyncio.create_task(self._open_pool(), name="ipybox-sessions")
            # Its failure is reported on stderr and to the next caller; none may be waiting now.
            self._pool_task.add_done_callback(lambda task: task.cancelled() or task.exception())

    async def _open_pool(self) -> Sessions:
        """Start the keyed sessions' :class:`Sessions`; a config server that fails to start is
        reported once and left out (every keyed session lists it as failed)."""
        module = await asyncio.to_thread(importlib.import_module, "ipybox_core.sessions")
        settings = self.settings
        servers = dict(self.server_configs)
        failures: dict[str, str] = {}
        if self._sessions_root is None:
            self._sessions_root = await asyncio.to_thread(self._open_sessions_root)
        while True:
            pool: Sessions = module.Sessions(
                root=self._sessions_root,
                warm=settings.warm_sessions,
                max_sessions=settings.max_sessions,
                idle_timeout=settings.idle_timeout,
                mcp_servers=servers,
                **self._executor_options(),
            )
            try:
                await pool.start()
            except IpyboxError as exc:
                name = getattr(exc, "server", None)
                if name not in servers:
                    self._notify(f"could not start the kernels of the client sessions: {exc}")
                    raise
                failures[name] = str(exc)
                del servers[name]  # and start again without it (Sessions connects all or nothing)
                self._notify(f"MCP server {name!r} from the config file failed to start: {exc}")
                continue
            self._pool_failures = failures
            self._pool = pool
            return pool

    async def _started_pool(self) -> Sessions:
        self._start_pool()
        task = self._pool_task
        assert task is not None
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            if task.cancelled():
                raise ExecutorUnavailable("the ipybox MCP server is shutting down") from None
            raise
        except Exception as exc:
            if self._pool_task is task and not self._closing:
                self._pool_task = None  # the next call tries again
            raise ExecutorUnavailable(f"ipybox could not start its kernel: {exc}") from None

    async def _keyed(self, key: str) -> ClientSession:
        pool = await self._started_pool()
        from ipybox_core.sessions import SessionLimitError  # imported with the pool

        try:
            session = await pool.session(key)
        except SessionLimitError:
            raise TooManySessions(
                f"all {self.settings.max_sessions} client sessions that may have a kernel "
                f"(--max-sessions {self.settings.max_sessions}) are running code or waiting for "
                "approval; end one (close its MCP session), wait until one finishes, or raise "
                "--max-sessions"
            ) from None
        except (IpyboxError, OSError) as exc:
            raise ExecutorUnavailable(f"ipybox could not start its kernel: {exc}") from None
        except RuntimeError:  # Sessions was closed meanwhile
            raise ExecutorUnavailable("the ipybox MCP server is shutting down") from None
        client = self._clients.get(key)
        if client is None or client.executor is not session.executor:
            if client is not None:  # never while one is parked: a parked execution keeps it busy
                await self.cancel_parked(key, "the session's kernel was closed")
            client = ClientSession(
                key, session.workspace, session.executor, dict(self._pool_failures), pooled=session
            )
            notice = session.take_restart_notice()
            if notice is None and key in self._before_restart:  # it had a kernel before a restart
                notice = RESTARTED_NOTICE
            self._before_restart.discard(key)
            if notice is not None:
                client.restart_notice = (
                    f"Note: {notice}; MCP servers registered with register_mcp_server are gone too. "
                    "Run the setup code again."
                )
            client.ready.set()
            # the servers its client registers with the register_mcp_server tool are the session's own
            session.executor.delegate_registration(
                lambda name, config: self._register_own(client, name, config)
            )
            live = set(pool.keys())
            for stale in [other for other in self._clients if other not in live]:
                del self._clients[stale]
            self._clients[key] = client
            for forgotten in self._remember_workspace(key, session.workspace, live):
                await asyncio.to_thread(self._remove_workspace, forgotten)
        client.last_used = time.monotonic()
        return client

    def _open_sessions_root(self) -> Path:
        """A fresh root for this run's session workspaces, ``<workspace>/.ipybox-sessions/run-*``
        (both mode 0700, made by the host); the roots of dead earlier runs are removed."""
        from ipybox_core.kernel._stale_dirs import mark_owner, sweep_stale_dirs

        workspace = self.settings.workspace
        with SafeDir.open(anchored(workspace, workspace), create=True) as top:
            with contextlib.suppress(FileExistsError):
                os.mkdir(SESSIONS_DIR, 0o700, dir_fd=top.fd)
            container = top.path / SESSIONS_DIR
            fd = os.open(SESSIONS_DIR, _DIRECTORY_FLAGS, dir_fd=top.fd)  # a planted link: refused
            try:
                info = os.fstat(fd)
                if info.st_uid != os.geteuid():
                    raise ConfigError(
                        f"{container} belongs to uid {info.st_uid}, not to this user: remove it"
                    )
                if info.st_mode & 0o077:
                    os.fchmod(fd, 0o700)  # made by an older ipybox with the umask's mode
                sweep_stale_dirs(Path(container), RUN_PREFIX)
                name = f"{RUN_PREFIX}{secrets.token_hex(16)}"
                os.mkdir(name, 0o700, dir_fd=fd)  # 128 random bits: no collision to retry
            finally:
                os.close(fd)
        root = Path(container) / name
        mark_owner(root)
        return root

    def _remove_workspace(self, workspace: Path) -> None:
        """Remove a session's working directory, never following what the kernel may have planted."""
        if self._sessions_root is not None and workspace.parent == self._sessions_root:
            with contextlib.suppress(OSError, IpyboxError), SafeDir.open(self._sessions_root) as root:
                root.remove_tree(workspace.name)

    def _remember_workspace(self, key: str, workspace: Path, live: set[str]) -> list[Path]:
        """Keep the working directory of ``key`` to remove it when the client ends the session or
        the server stops; returns the oldest of too many closed sessions' directories, to remove."""
        self._workspaces.pop(key, None)
        self._workspaces[key] = workspace
        excess = len(self._workspaces) - _FORGET_WORKSPACES_AFTER
        if excess <= 0:
            return []
        return [self._workspaces.pop(old) for old in [k for k in self._workspaces if k not in live][:excess]]

    async def _register_own(
        self, client: ClientSession, name: str, config: Mapping[str, Any] | McpServerConfig
    ) -> RegisteredServer:
        """``register_mcp_server`` in a keyed session: the connection is the session's own; the
        API goes to the directory every keyed session imports from (see :class:`_OwnApi`)."""
        from ipybox_core.codegen import generate_server_package
        from ipybox_core.executor.executor import RegisteredServer

        executor, key = client.executor, client.key
        assert executor is not None
        assert executor.shared_tools is not None
        assert key is not None
        shared = executor.shared_tools
        if name in shared.servers:
            raise ConfigError(
                f"MCP server {name!r} comes from the server's config file and is shared by every "
                "session: register yours under another name"
            )
        parsed = parse_server_config(name, config, environ=self.environment.mcp_env)
        tools = await shared.registry.add(name, parsed)
        fingerprint = repr(sorted(tools, key=lambda tool: tool.name))
        own = self._own_apis.get(name)
        users = {
            user: other
            for user, other in (own.users.items() if own is not None else ())
            if user != key and self._clients.get(user) is not None and self._clients[user].executor is other
        }
        if own is not None and users and own.tools != fingerprint:
            await shared.registry.remove(name)
            raise ConfigError(
                f"another client session registered a different MCP server named {name!r}: register "
                "this one under another name"
            )
        if own is None or own.tools != fingerprint:
            package = await asyncio.to_thread(generate_server_package, name, tools, executor.api_root)
            own = _OwnApi(fingerprint, package)
        own.users = {**users, key: executor}
        self._own_apis[name] = own
        registered = RegisteredServer(name=name, config=parsed, package=own.package)
        executor.attach_server(registered)
        return registered


def _ended_key(session: str | None, call: str) -> str:
    return f"{session or ''}\x00{call}"


def _remove_tree(directory: Path) -> None:
    """Remove ``directory`` and everything in it, never following what a kernel may have planted."""
    with contextlib.suppress(OSError, IpyboxError), SafeDir.open(directory.parent) as parent:
        parent.remove_tree(directory.name)


def first_line(text: str) -> str:
    """The first non-empty line of an error (a server's error may carry its stderr's last lines)."""
    return next((line.strip() for line in text.splitlines() if line.strip()), text.strip())


def _stderr(message: str) -> None:
    print(f"ipybox: warning: {message}", file=sys.stderr, flush=True)
