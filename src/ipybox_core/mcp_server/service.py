"""The code executor behind the MCP server: started in the background, closed with the server."""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import sys
from collections.abc import Callable
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


class ExecutorUnavailable(IpyboxError):
    """The kernel (or the sandbox around it) could not be started."""


class IpyboxService:
    """Owns one :class:`CodeExecutor` for all clients of the MCP server.

    :meth:`start` returns at once: the kernel starts and the ``config`` servers are registered in
    the background while the MCP handshake proceeds; tools wait for :meth:`executor`. A config
    server that fails to start is reported (:attr:`startup_failures`) and skipped.

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
        # state; the context is the call's output limit.
        self.parked: SuspendedExecutions[int] = SuspendedExecutions(
            abandon_after=settings.approval_timeout + 60.0,
            abandon_reason="nobody answered the approval request in time",
        )
        self.startup_failures: dict[str, str] = {}
        self._notify = notify or _stderr
        self._executor: CodeExecutor | None = None
        self._start_error: BaseException | None = None
        self._ready = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []

    async def __aenter__(self) -> IpyboxService:
        self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    def start(self) -> None:
        """Start the kernel and register the config servers in the background."""
        if self._tasks:
            return
        self._tasks = [asyncio.create_task(self._start(), name="ipybox-start")]

    @property
    def ready(self) -> bool:
        return self._ready.is_set()

    async def executor(self) -> CodeExecutor:
        """The running executor, once started.

        Raises:
            ExecutorUnavailable: the kernel could not be started (the message says why).
        """
        await self._ready.wait()
        if self._executor is None or self._start_error is not None:
            raise ExecutorUnavailable(f"ipybox could not start its kernel: {self._start_error}")
        return self._executor

    async def close(self) -> None:
        """Cancel parked executions and stop the kernel and every MCP server process."""
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(BaseException):
                await task
        await self.parked.cancel_all("the ipybox MCP server is shutting down")
        if self._executor is not None:
            await self._executor.close()

    async def _start(self) -> None:
        try:
            # Imported in a thread: the MCP handshake goes on meanwhile.
            module = await asyncio.to_thread(importlib.import_module, "ipybox_core.executor")
            settings = self.settings
            self._executor = executor = module.CodeExecutor(
                workspace=settings.workspace,
                api_dir=settings.api_dir,
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
                    self.startup_failures[name] = str(exc)
                    self._notify(f"ipybox: MCP server {name!r} from the config file failed to start: {exc}")
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self._start_error = exc
            self._notify(f"ipybox: could not start the kernel: {exc}")
        finally:
            self._ready.set()


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)
