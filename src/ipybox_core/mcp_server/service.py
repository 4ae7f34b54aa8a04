"""The code executors behind the MCP server: one per client session, started in the background,
closed with the session or the server.

Over stdio there is one client and one kernel (the *default* session). Over Streamable HTTP each
MCP session gets its own kernel, workspace and registered servers (:meth:`IpyboxService.session`
with the session's key); a session idle for ``idle_timeout`` seconds loses its kernel, and its
next ``execute_code`` is told so.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import importlib
import sys
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING

from ipybox_core.errors import ConfigError, IpyboxError
from ipybox_core.mcp.config import McpServerConfig, load_mcp_config
from ipybox_core.mcp_server.environment import Environment, load_environment
from ipybox_core.mcp_server.settings import McpServerSettings
from ipybox_core.sandbox.policy import resolve_sandbox
from ipybox_core.suspended import SuspendedExecutions

if TYPE_CHECKING:
    from ipybox_core.executor import CodeExecutor

SESSIONS_DIR = ".ipybox-sessions"
"""Under the workspace: one working directory per client session (Streamable HTTP)."""
_FORGET_REAPED_AFTER = 10_000


class ExecutorUnavailable(IpyboxError):
    """The kernel (or the sandbox around it) could not be started."""


class TooManySessions(IpyboxError):
    """``max_sessions`` client sessions already have a kernel."""


@dataclass(frozen=True)
class ParkedCall:
    """What a parked ``execute_code`` needs again on resume."""

    session: str | None
    """The key of the session that started it: only that session can resume it."""
    max_chars: int
    call: str | None = None
    """The call id the client chose for this ``execute_code`` (if it gave one)."""


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

    def take_restart_notice(self) -> str | None:
        """The message that this session's earlier kernel was stopped (once), or ``None``."""
        notice, self.restart_notice = self.restart_notice, None
        return notice


class IpyboxService:
    """Owns the :class:`CodeExecutor` of each client session of the MCP server.

    :meth:`start` returns at once: the default session's kernel starts and the ``config`` servers
    are registered in the background while the MCP handshake proceeds; tools wait for
    :meth:`session`. A config server that fails to start is reported (``startup_failures``) and
    skipped. Other sessions start on their first tool call.

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
        self.parked: SuspendedExecutions[ParkedCall] = SuspendedExecutions(
            abandon_after=settings.approval_timeout + 60.0,
            abandon_reason="nobody answered the approval request in time",
        )
        self._notify = notify or _stderr
        self._default = ClientSession(None, settings.workspace)
        self._sessions: dict[str, ClientSession] = {}
        self._reaped: OrderedDict[str, Path] = OrderedDict()  # key → its kept working directory
        self._tasks: list[asyncio.Task[None]] = []
        self._closing = False
        self._default_started = False

    async def __aenter__(self) -> IpyboxService:
        self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    def start(self, *, default_session: bool = True) -> None:
        """Start the default session's kernel (unless ``default_session`` is false: then it starts
        on first use) and the reaper of idle sessions, in the background."""
        if self._tasks:
            return
        self._tasks = [asyncio.create_task(self._reap_idle(), name="ipybox-reaper")]
        if default_session:
            self._start_default()

    @property
    def startup_failures(self) -> dict[str, str]:
        """The config servers that failed to start in the default session."""
        return self._default.startup_failures

    @property
    def ready(self) -> bool:
        return self._default.ready.is_set()

    @property
    def live_sessions(self) -> int:
        """Client sessions (other than the default one) that have a kernel."""
        return len(self._sessions)

    async def executor(self) -> CodeExecutor:
        """The default session's running executor, once started."""
        executor = (await self.session(None)).executor
        assert executor is not None
        return executor

    async def session(self, key: str | None) -> ClientSession:
        """The session ``key`` (``None``: the default one) with a running executor.

        A session seen for the first time (or again after its kernel was stopped for idleness)
        gets a new kernel.

        Raises:
            ExecutorUnavailable: the kernel could not be started (the message says why).
            TooManySessions: ``max_sessions`` sessions already have a kernel.
        """
        if self._closing:
            raise ExecutorUnavailable("the ipybox MCP server is shutting down")
        if key is None:
            session = self._default
            self._start_default()
        else:
            session = self._sessions.get(key) or self._new_session(key)
        session.last_used = time.monotonic()
        await session.ready.wait()
        if session.executor is None or session.error is not None:
            if key is not None and self._sessions.get(key) is session:
                del self._sessions[key]  # the next call tries again
            raise ExecutorUnavailable(f"ipybox could not start its kernel: {session.error}")
        session.last_used = time.monotonic()
        return session

    async def close_session(self, key: str) -> None:
        """The client ended session ``key``: stop its executions, kernel and MCP servers, and
        remove its working directory."""
        reaped = self._reaped.pop(key, None)
        session = self._sessions.pop(key, None)
        if session is not None:
            await self._stop(session)
        workspace = session.workspace if session is not None else reaped
        if workspace is not None:
            await asyncio.to_thread(_remove_workspace, self.settings.workspace, workspace)

    async def cancel_parked(self, key: str | None, reason: str) -> int:
        """Cancel the executions of session ``key`` parked for an approval round."""
        return await self.parked.cancel_all(reason, where=lambda parked: parked.context.session == key)

    async def close(self) -> None:
        """Cancel parked executions and stop every kernel and MCP server process."""
        self._closing = True
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(BaseException):
                await task
        await self.parked.cancel_all("the ipybox MCP server is shutting down")
        sessions = [self._default, *self._sessions.values()]
        self._sessions.clear()
        await asyncio.gather(*(self._stop(session) for session in sessions), return_exceptions=True)
        workspaces = [session.workspace for session in sessions[1:]] + list(self._reaped.values())
        self._reaped.clear()
        for workspace in workspaces:
            await asyncio.to_thread(_remove_workspace, self.settings.workspace, workspace)

    # --- internals -------------------------------------------------------------------------

    def _start_default(self) -> None:
        if not self._default_started:
            self._default_started = True
            self._tasks.append(asyncio.create_task(self._open(self._default), name="ipybox-start"))

    def _new_session(self, key: str) -> ClientSession:
        if len(self._sessions) >= self.settings.max_sessions:
            raise TooManySessions(
                f"{len(self._sessions)} client sessions already have a kernel, the maximum "
                f"(--max-sessions {self.settings.max_sessions}); end one (close its MCP session) or wait "
                f"until an idle one is stopped (after {self.settings.idle_timeout:g} s)"
            )
        digest = hashlib.sha256(key.encode()).hexdigest()[:24]
        session = ClientSession(key, self.settings.workspace / SESSIONS_DIR / digest)
        if self._reaped.pop(key, None) is not None:
            session.restart_notice = (
                f"Note: this session was idle for more than {self.settings.idle_timeout:g} s, so its kernel "
                "was stopped and a new one started: variables, imports and MCP servers registered with "
                "register_mcp_server are gone (files in the working directory are kept). Run the setup "
                "code again."
            )
        self._sessions[key] = session
        self._tasks.append(asyncio.create_task(self._open(session), name=f"ipybox-session-{digest}"))
        return session

    async def _open(self, session: ClientSession) -> None:
        try:
            # Imported in a thread: the MCP handshake goes on meanwhile.
            module = await asyncio.to_thread(importlib.import_module, "ipybox_core.executor")
            settings = self.settings
            keyed = session.key is not None
            api_package = settings.api_dir.name if settings.api_dir is not None else "mcptools"
            session.executor = executor = module.CodeExecutor(
                workspace=session.workspace,
                api_dir=None if keyed else settings.api_dir,
                api_package=api_package,
                sandbox=self.sandbox if self.sandbox is not None else False,
                approval="always",
                approval_timeout=settings.approval_timeout,
                mcp_env=self.environment.mcp_env,
                kernel_env=self.environment.kernel_env,
                timeout=settings.timeout,
            )
            await executor.start()
            for name, config in self.server_configs.items():
                try:
                    await executor.register_mcp_server(name, config)
                except IpyboxError as exc:
                    session.startup_failures[name] = str(exc)
                    if not keyed:
                        self._notify(
                            f"ipybox: MCP server {name!r} from the config file failed to start: {exc}"
                        )
        except asyncio.CancelledError:
            session.error = ExecutorUnavailable("the ipybox MCP server is shutting down")
            raise
        except Exception as exc:
            session.error = exc
            self._notify(f"ipybox: could not start the kernel: {exc}")
        finally:
            session.ready.set()

    async def _stop(self, session: ClientSession) -> None:
        await self.cancel_parked(session.key, "the session ended")
        if session.executor is not None:
            await session.executor.close()

    async def _reap_idle(self) -> None:
        """Stop the kernels of sessions idle for ``idle_timeout`` (never the default session)."""
        timeout = self.settings.idle_timeout
        while True:
            await asyncio.sleep(min(max(timeout / 4, 0.05), 30.0))
            now = time.monotonic()
            for key, session in list(self._sessions.items()):
                if not session.ready.is_set():
                    continue
                if (session.executor is not None and session.executor.busy) or any(
                    parked.context.session == key for parked in self.parked.values()
                ):
                    session.last_used = now
                    continue
                if now - session.last_used < timeout or self._sessions.get(key) is not session:
                    continue
                del self._sessions[key]
                self._reaped[key] = session.workspace
                with contextlib.suppress(Exception):
                    await self._stop(session)
                while len(self._reaped) > _FORGET_REAPED_AFTER:
                    _, forgotten = self._reaped.popitem(last=False)
                    await asyncio.to_thread(_remove_workspace, self.settings.workspace, forgotten)


def _remove_workspace(root: Path, workspace: Path) -> None:
    """Remove a session's working directory, never following what the kernel may have planted."""
    from ipybox_core._safe_fs import SafeDir

    with contextlib.suppress(OSError, IpyboxError), SafeDir.open(root / SESSIONS_DIR) as sessions:
        sessions.remove_tree(workspace.name)


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)
