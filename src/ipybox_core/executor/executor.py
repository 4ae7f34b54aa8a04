"""CodeExecutor: the one object an application holds."""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import shutil
import tempfile
import weakref
from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from ipybox_core._ended_calls import EndedCalls
from ipybox_core.approval import (
    ApprovalDecision,
    ApprovalGate,
    ApprovalPolicy,
    ApprovalRequest,
    AuditLog,
    CallOutcome,
)
from ipybox_core.approval.policy import check_policy
from ipybox_core.approval.request import TIMEOUT
from ipybox_core.codegen import (
    GeneratedPackage,
    api_reference,
    generate_server_package,
    kernel_reload_code,
    remove_server_package,
)
from ipybox_core.errors import (
    ApprovalError,
    ConfigError,
    ExecutionGone,
    ExecutorBusy,
    ExecutorClosed,
    KernelDied,
)
from ipybox_core.executor._conversation import ConversationExecutor, SharedSession
from ipybox_core.executor._shared import Registrar, SharedTools
from ipybox_core.executor.events import DisplayOutput, ExecutionResult, OutputChunk, ToolCall
from ipybox_core.executor.execution import ENDED, Emit, Execution
from ipybox_core.hosttools import HOST_SERVER, HostBackend, HostTool, HostTools
from ipybox_core.hosttools._package import (
    HOST_NAME_TAKEN,
    HOST_ROOT,
    combined_reference,
    host_reload_code,
    write_host_package,
)
from ipybox_core.kernel import Deadline, DisplayData, Kernel, KernelConfig, OutputCollector, StreamText
from ipybox_core.kernel._stale_dirs import mark_owner
from ipybox_core.kernel.backend import KernelBackend
from ipybox_core.kernel.gateway import GatewayConfig, GatewayKernel
from ipybox_core.mcp import McpRegistry, McpServerConfig, load_mcp_config, parse_server_config
from ipybox_core.mcp.elicitation import ElicitationAnswer, ElicitationRequest
from ipybox_core.mcp.oauth_store import TokenStore
from ipybox_core.protocol import MOVED_ON, expired
from ipybox_core.sandbox import SandboxPolicy, resolve_sandbox, sandbox_launcher
from ipybox_core.toolserver import ToolServer

if TYPE_CHECKING:
    from ipybox_core.mcp.elicitation import Elicit
    from ipybox_core.mcp.oauth import Authorize
    from ipybox_core.mcp.sampling import Sample

DEFAULT_TIMEOUT = 120.0
DEFAULT_ABANDON_AFTER = 900.0
"""The in-process backstop for an unanswered approval (:attr:`CodeExecutor.abandon_after`)."""
ABANDONED_AFTER = "abandoned: nobody decided this call within {delay:g} s (the executor's abandon_after)"
DEFAULT_CALL_TIMEOUT = 60.0
"""Seconds an MCP call may take by default (half the execution timeout when that is shorter)."""
NO_APPROVER = (
    "execute() cannot ask anyone, but the code's call {name!r} needs a decision under the approval "
    "policy. Use stream() to decide each call, pass execute(..., approve_all=True) to accept every "
    "call, or set the executor's approval= policy (e.g. ApprovalRules) to decide it without asking"
)
UNANSWERED_AFTER = "nobody answered within {delay:g} s (the executor's abandon_after)"
NO_ONE_TO_ASK = (
    "execute() has no one to ask (answer questions from the events of stream(), or pass "
    "CodeExecutor(mcp_elicit=...))"
)
NO_EXECUTION = (
    "no execution was running to ask, and no elicitation handler is configured (CodeExecutor(mcp_elicit=...))"
)


@dataclass(frozen=True)
class RegisteredServer:
    """An MCP server known to the executor and the Python API generated for it."""

    name: str
    config: McpServerConfig
    package: GeneratedPackage

    @property
    def module(self) -> str:
        """Import path of the generated API, e.g. ``mcptools.github``."""
        return f"{self.package.path.parent.name}.{self.package.module}"

    @property
    def reference(self) -> str:
        """Compact signatures of this server's tools (see :meth:`CodeExecutor.api_reference`)."""
        return api_reference([self.package], package=self.package.path.parent.name)


class CodeExecutor:
    """Runs code in a stateful IPython kernel whose MCP tool calls wait for your approval.

    ``async with CodeExecutor(workspace="ws") as ex:`` starts the kernel (optionally sandboxed),
    the tool server and the MCP connections; :meth:`register_mcp_server` generates a typed API
    (``from mcptools.<server> import <tool>``) usable at once in the kernel; :meth:`stream` runs code
    and yields its output and :class:`ApprovalRequest` events; :meth:`execute` runs code to the end
    and accepts requests only when told to (``approve_all=True``).

    ``workspace`` is the kernel's working directory; by default a fresh temporary directory,
    removed by :meth:`aclose`.

    ``approval`` decides which MCP calls need a decision: ``"always"`` (default), ``"never"``,
    :class:`ApprovalRules` or a callable. With ``approve_shell=True`` shell commands (``!cmd``,
    ``%%bash``) are approval requests too. ``timeout`` is the default execution timeout in seconds;
    time spent waiting for a decision does not count against it (code in other threads keeps
    running meanwhile). ``wall_timeout`` caps an execution's wall-clock time, waits for decisions
    included: it never pauses. ``call_timeout`` bounds one MCP call (default 60 s, or half of
    ``timeout`` when shorter, so a hung call raises in the code before the execution times out).

    The generated API goes to ``<workspace>/<api_package>`` (``from mcptools.<server> import ...``),
    or to ``api_dir`` (its last component is then the package name) to keep it out of a project.
    A sandboxed executor without ``api_dir`` keeps it in a private host directory instead, shown
    read-only in the sandbox: the host never writes where sandboxed code can plant links.

    MCP server configs may use ``${VAR}`` placeholders, filled from ``mcp_env`` (default: the
    host's environment). The kernel sees none of that: its environment is only ``kernel_env`` plus
    what the kernel needs to run. Servers with ``"auth": "oauth"`` are authorized on the host:
    ``mcp_authorize`` answers their :class:`~ipybox_core.mcp.oauth.AuthorizationRequest` (a URL for a
    user to open), ``mcp_token_store`` keeps their tokens (default: the user's state directory).
    A server's own requests during a call go to ``mcp_elicit`` (questions for the user), ``mcp_sample``
    (LLM completions) and ``mcp_roots`` (default: the workspace); see :class:`McpRegistry`. Without
    ``mcp_elicit``, a question that arrives during an execution is an
    :class:`~ipybox_core.mcp.elicitation.ElicitationRequest` event of that execution, answered with
    its methods (:meth:`execute` declines it); the time it waits is not counted against ``timeout``
    or ``call_timeout`` (``wall_timeout`` counts it).

    ``kernel_gateway`` (a URL, with ``gateway_token``, or a :class:`GatewayConfig`) runs the kernel on
    a Jupyter Kernel Gateway / Enterprise Gateway instead of locally; the tool server then listens on
    TCP (``GatewayConfig.tool_server_*``) and approvals, MCP connections and credentials stay here.
    ``sandbox`` cannot be combined with it: the gateway's own isolation applies.

    ``host_tools`` (:class:`~ipybox_core.hosttools.HostTool`, or :meth:`register_host_tools`) are
    the application's own async functions, importable in the kernel as typed functions
    (``from agent_tools import <tool>``, generated like an MCP server's API); their calls pass the
    approval policy and audit log as calls of server ``"agent_tools"`` and run in this process
    with the context :meth:`bind_tool_context` bound.

    ``shared_tools`` (:class:`SharedTools`) gives the executor MCP connections and a generated API
    that its owner (a :class:`~ipybox_core.sessions.Sessions`) keeps; ``mcp_servers`` and
    ``api_dir`` are then not used.
    """

    abandon_after: float | None = DEFAULT_ABANDON_AFTER
    """The in-process backstop: an approval of an execution started with a ``call_id`` that stays
    undecided this long (default 15 minutes) cancels the execution (its pending call never runs).
    Adapters cancel at once when a conversation moves on; this only catches one that never comes
    back. ``None``: no backstop (the approval waits until decided or ``approval_timeout``). An MCP
    server's question of any execution left unanswered this long is declined."""

    def __init__(
        self,
        *,
        workspace: str | os.PathLike[str] | None = None,
        sandbox: bool | SandboxPolicy | str | os.PathLike[str] | None = False,
        approval: ApprovalPolicy = "always",
        approval_timeout: float | None = None,
        audit_log: str | os.PathLike[str] | None = None,
        approve_shell: bool = False,
        mcp_servers: Mapping[str, Mapping[str, Any] | McpServerConfig] | str | os.PathLike[str] | None = None,
        mcp_env: Mapping[str, str] | None = None,
        timeout: float | None = DEFAULT_TIMEOUT,
        wall_timeout: float | None = None,
        output_limit: int = 100_000,
        kernel_env: Mapping[str, str] | None = None,
        api_package: str = "mcptools",
        api_dir: str | os.PathLike[str] | None = None,
        connect_timeout: float = 30.0,
        call_timeout: float | None = None,
        reset_cwd: bool = False,
        kernel_gateway: str | GatewayConfig | None = None,
        gateway_token: str | None = None,
        host_tools: Iterable[HostTool] = (),
        shared_tools: SharedTools | None = None,
        mcp_authorize: Authorize | None = None,
        mcp_token_store: TokenStore | None = None,
        mcp_elicit: Elicit | None = None,
        mcp_sample: Sample | None = None,
        mcp_roots: Sequence[str | os.PathLike[str]] | None = None,
    ) -> None:
        self._owned_workspace: weakref.finalize[Any, Any] | None = None
        if workspace is None:
            created = Path(tempfile.mkdtemp(prefix="ipybox-workspace-")).resolve()
            self._owned_workspace = weakref.finalize(self, shutil.rmtree, created, ignore_errors=True)
            workspace = created
        self.workspace = Path(workspace).resolve()
        if call_timeout is None:
            call_timeout = DEFAULT_CALL_TIMEOUT if timeout is None else min(DEFAULT_CALL_TIMEOUT, timeout / 2)
        self.gateway = _gateway_config(kernel_gateway, gateway_token)
        if self.gateway is not None and sandbox not in (False, None):
            raise ConfigError(
                "sandbox cannot be combined with kernel_gateway: ipybox's bubblewrap sandbox wraps a local "
                "kernel process, while a gateway starts kernels itself; the gateway's own isolation (a "
                "container or pod per kernel on Enterprise Gateway) applies instead. Pass sandbox=False."
            )
        self.sandbox: SandboxPolicy | None = resolve_sandbox(sandbox)
        self.timeout = timeout
        self.wall_timeout = wall_timeout
        self._api_package = api_package
        self._private_api = api_dir is None and self.sandbox is not None and self.gateway is None
        self.api_root = Path(api_dir).resolve() if api_dir is not None else self.workspace / api_package
        """Where the generated API is written; its name is the package kernel code imports from.
        (Sandboxed without ``api_dir``: a private directory, known once the executor started.)"""
        self._gate = ApprovalGate(
            approval,
            timeout=approval_timeout,
            audit=AuditLog(audit_log, untrusted_below=self.workspace) if audit_log is not None else None,
        )
        self._mcp_env = mcp_env
        self._registry = McpRegistry(
            connect_timeout=connect_timeout,
            call_timeout=call_timeout,
            environ=mcp_env,
            authorize=mcp_authorize,
            token_store=mcp_token_store,
            elicit=mcp_elicit if mcp_elicit is not None else self.ask_in_execution,
            sample=mcp_sample,
            roots=[Path(root) for root in mcp_roots] if mcp_roots is not None else [self.workspace],
        )
        self._initial_servers = mcp_servers
        self._approve_shell = approve_shell
        self._output_limit = output_limit
        self._kernel_env = dict(kernel_env or {})
        self._reset_cwd = reset_cwd
        self._servers: dict[str, RegisteredServer] = {}
        self._host_tools = HostTools(host_tools)
        self._host_package: GeneratedPackage | None = None
        self._tool_context: Any = None
        self._host_stale = False  # the kernel must forget an imported agent_tools package
        self._kernel: KernelBackend | None = None
        self._toolserver: ToolServer | None = None
        self._runtime_dir: Path | None = None
        self._execution: Execution | None = None
        self._asking: Callable[[ElicitationRequest], Awaitable[ElicitationAnswer]] | None = None
        self._call: tuple[str, Execution] | None = None  # the last execution started with a call id
        self._ended = EndedCalls()  # why the calls that ended unanswered ended
        self._stale_modules: set[str] = set()  # generated modules the kernel must forget
        self._state: str = "new"
        self._shared = shared_tools
        self._registrar: Registrar | None = None
        if shared_tools is not None:
            self._registry = shared_tools.registry
            self._servers = dict(shared_tools.servers)
            self.api_root = shared_tools.api_root
            self._private_api = False
            self._initial_servers = None

    # --- lifecycle --------------------------------------------------------------------------

    async def __aenter__(self) -> CodeExecutor:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def start(self) -> None:
        """Start the tool server and the kernel, and register ``mcp_servers``."""
        if self._state != "new":
            raise (
                ExecutorClosed("an executor can be started once")
                if self._state == "closed"
                else RuntimeError("the executor is already started")
            )
        self._state = "starting"
        try:
            self.workspace.mkdir(parents=True, exist_ok=True)
            self._runtime_dir = Path(tempfile.mkdtemp(prefix="ipybox-", dir=_short_tmp()))
            mark_owner(self._runtime_dir)  # swept by a later start if this process dies
            if self._private_api:
                self.api_root = self._runtime_dir / "api" / self._api_package
            self.api_root.parent.mkdir(parents=True, exist_ok=True)  # on sys.path (and in the sandbox)
            backend = HostBackend(
                self._host_tools,
                self._registry if self._shared is None else self._shared.backend,
                context=lambda: self._tool_context,
                call_timeout=self._registry.call_timeout,
            )
            self._toolserver = ToolServer(backend, self._gate)
            await self._write_host_tools()
            if self.gateway is None:
                await self._toolserver.start_unix(self._runtime_dir / "tools.sock")
                self._kernel = await Kernel.start(self._kernel_config())
            else:
                self._kernel = await self._start_gateway_kernel(self.gateway)
            if self._host_package is not None:  # generated before the kernel started
                self._kernel.install_package(HOST_SERVER, self._host_package.path)
            for name, config in self._server_configs().items():
                await self.register_mcp_server(name, config)
            for registered in self._servers.values() if self._shared is not None else ():
                self._kernel.install_package(  # shared tools, generated already
                    f"{self.api_root.name}/{registered.package.module}", registered.package.path
                )
        except BaseException:
            await self.aclose()
            raise
        self._state = "running"

    async def aclose(self) -> None:
        """Stop everything: the running execution, the kernel, MCP servers, the tool server."""
        if self._state == "closed":
            return
        self._state = "closed"
        if self._execution is not None and not self._execution.done:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._execution.cancel("the executor was closed"), 10)
        if self._kernel is not None:
            await self._kernel.shutdown()
            self._kernel = None
        await self._registry.aclose()
        if self._toolserver is not None:
            await self._toolserver.aclose()
        if self._runtime_dir is not None:
            shutil.rmtree(self._runtime_dir, ignore_errors=True)
        if self._owned_workspace is not None:
            self._owned_workspace()

    close = aclose
    """The older name of :meth:`aclose`."""

    # --- MCP servers ------------------------------------------------------------------------

    async def register_mcp_server(
        self, name: str, config: Mapping[str, Any] | McpServerConfig
    ) -> RegisteredServer:
        """Connect to an MCP server, generate its Python API and make it importable in the kernel.

        Registering a name again replaces the server and its API.
        """
        if self._registrar is not None:
            return await self._registrar(name, config)
        self._check_own_servers()
        if name == HOST_SERVER and self._host_tools:
            raise ConfigError(HOST_NAME_TAKEN)
        parsed = parse_server_config(name, config, environ=self._mcp_env)
        tools = await self._registry.add(name, parsed)
        package = await asyncio.to_thread(generate_server_package, name, tools, self.api_root)
        if self._kernel is not None:
            self._kernel.install_package(f"{self.api_root.name}/{package.module}", package.path)
        registered = RegisteredServer(name=name, config=parsed, package=package)
        self._servers[name] = registered
        self._stale_modules.add(package.module)
        return registered

    async def unregister_mcp_server(self, name: str) -> None:
        """Disconnect a server and remove its generated API."""
        self._check_own_servers()
        registered = self._servers.pop(name, None)
        await self._registry.remove(name)
        if registered is not None:
            await asyncio.to_thread(remove_server_package, name, self.api_root)
            self._stale_modules.add(registered.package.module)
            if self._kernel is not None:
                self._kernel.uninstall_package(f"{self.api_root.name}/{registered.package.module}")

    @property
    def servers(self) -> dict[str, RegisteredServer]:
        """The registered MCP servers by name."""
        return dict(self._servers)

    # --- host tools -------------------------------------------------------------------------

    async def register_host_tools(self, tools: Iterable[HostTool]) -> GeneratedPackage | None:
        """Use ``tools`` as the host tools from now on (replacing earlier ones; none: no
        ``agent_tools`` package) and make them importable in the kernel at once.

        Raises:
            ConfigError: an MCP server is registered as ``"agent_tools"``.
        """
        tools = list(tools)
        if tools and HOST_SERVER in self._servers:
            raise ConfigError(HOST_NAME_TAKEN)
        self._host_tools.replace(tools)
        if self._state in ("starting", "running"):
            await self._write_host_tools()
        return self._host_package

    @property
    def host_tools(self) -> list[HostTool]:
        """The registered host tools."""
        return list(self._host_tools)

    @property
    def call_timeout(self) -> float | None:
        """Seconds one MCP or host tool call of the code may take (``None``: no limit)."""
        return self._registry.call_timeout

    def bind_tool_context(self, context: Any) -> None:
        """Hand ``context`` (e.g. a framework's run context) to every host tool call from now on,
        as :attr:`HostCall.context <ipybox_core.hosttools.HostCall.context>`, until bound again;
        an adapter binds its run's context before each execution or resume."""
        self._tool_context = context

    def api_reference(self, servers: list[str] | None = None, *, max_chars: int | None = None) -> str:
        """Compact Python signatures of the registered tools (and host tools unless ``servers``
        names others), for an agent's prompt (``""``: none)."""
        names = servers if servers is not None else sorted(self._servers)
        host = self._host_package if servers is None or HOST_SERVER in servers else None
        packages = [
            self._servers[name].package for name in names if name != HOST_SERVER or name in self._servers
        ]
        return combined_reference(packages, host, package=self.api_root.name, max_chars=max_chars)

    def tool_summaries(self) -> dict[str, dict[str, str]]:
        """The registered MCP tools (and host tools) by server and name, each with its summary."""
        packages = [server.package for server in self._servers.values()]
        if self._host_package is not None:
            packages.append(self._host_package)
        return {package.server: {tool.tool: tool.summary for tool in package.tools} for package in packages}

    def tool_description(self, server: str, tool: str) -> str | None:
        """The full description of a registered MCP tool (``None``: unknown or undescribed)."""
        registered = self._servers.get(server)
        package = registered.package if registered is not None else None
        if server == HOST_SERVER and package is None:
            package = self._host_package
        if package is None:
            return None
        try:
            return package.tool(tool).description or None
        except KeyError:
            return None

    # --- execution --------------------------------------------------------------------------

    @property
    def busy(self) -> bool:
        """True while an execution runs or waits for approval."""
        return self._execution is not None and not self._execution.done

    def stream(
        self,
        code: str,
        *,
        timeout: float | None = None,
        wall_timeout: float | None = None,
        call_id: str | None = None,
    ) -> Execution:
        """Run ``code``; iterate the result for :class:`OutputChunk`, :class:`DisplayOutput`,
        :class:`ApprovalRequest`, :class:`ElicitationRequest` (without ``mcp_elicit``),
        :class:`ToolCall` events and finally the :class:`ExecutionResult`.

        Raises :class:`ExecutorBusy` if another execution is still running: executions are not
        queued. ``timeout`` defaults to the executor's; time waiting for approval is not counted.
        ``wall_timeout`` (default: the executor's) is a wall-clock cap that counts everything.
        ``call_id`` (e.g. a framework's tool call id) names the execution: while it waits for a
        decision, :meth:`reattach` finds it again from anywhere in this process, and
        :attr:`abandon_after` is its backstop.
        """
        self._check_running()
        if self.busy:
            raise ExecutorBusy(
                "another execution is still running or waiting for approval; wait for it or cancel() it"
            )
        limit = timeout if timeout is not None else self.timeout
        wall_limit = wall_timeout if wall_timeout is not None else self.wall_timeout

        async def drive(emit: Emit) -> ExecutionResult:
            return await self._drive(code, limit, wall_limit, emit, execution, backstop=call_id is not None)

        execution = Execution(drive, self._finished, self._interrupt)
        self._execution = execution
        self._call = (call_id, execution) if call_id is not None else None
        if call_id is not None:
            self._ended.forget(call_id)
            execution.add_done_callback(lambda ended: _record_end(self._ended, call_id, ended))
        return execution

    async def reattach(self, call_id: str) -> Execution | None:
        """The execution started under ``call_id`` that still waits (or ended without anyone seeing
        its result, e.g. its approval expired and the code went on), its pending approval requests
        handed out again as its next events: an adapter instance other than the one that started it
        picks it up (a web app that builds its agent per request); ``None`` when there is none."""
        if self._call is None or self._call[0] != call_id:
            return None
        execution = self._call[1]
        if execution.done and execution.delivered:
            return None
        execution.resurface()
        return execution

    async def ended(self, call_id: str) -> ExecutionGone | None:
        """Why nothing waits under ``call_id`` (when :meth:`reattach` found nothing): an
        :class:`ExecutionGone` whose ``cause`` and message name it (cancelled and why, timed out,
        its kernel died, its approval expired, answered by whom); ``None`` when not known. The
        newest few thousand calls are remembered."""
        return self._ended.get(call_id)

    async def cancel_waiting(
        self,
        *,
        calls: Collection[str] | None = None,
        keep: Collection[str] = (),
        reason: str | None = None,
        scope: str | None = None,
    ) -> int:
        """Cancel the execution started with a call id that waits for a decision (only if its call
        id is in ``calls`` when given, never if in ``keep``, only if it starts with ``scope`` when
        given); its pending calls are rejected with ``reason``. Returns how many (0 or 1)."""
        if self._call is None:
            return 0
        call_id, execution = self._call
        if execution.done or not (execution.pending_approvals or execution.pending_questions):
            return 0
        if (calls is not None and call_id not in calls) or call_id in keep:
            return 0
        if scope is not None and not call_id.startswith(scope):
            return 0
        await execution.cancel(reason or MOVED_ON)
        return 1

    @property
    def shares_kernel(self) -> bool:
        """True: every conversation of this executor runs in its one kernel."""
        return True

    async def session(self, key: str) -> SharedSession:
        """Conversation ``key`` of this executor: every conversation shares its kernel, each has
        its own call ids (an adapter given one executor sees it as a source of sessions)."""
        return SharedSession(key, ConversationExecutor(self, key))

    async def execute(
        self, code: str, *, timeout: float | None = None, approve_all: bool = False
    ) -> ExecutionResult:
        """Run ``code`` to the end and return its result.

        A call that the approval policy leaves to a decision is accepted with ``approve_all=True``;
        otherwise it is rejected, the execution cancelled, and :class:`ConfigError` raised naming the
        fix (use :meth:`stream` to decide each call).
        """
        return await run_to_end(self.stream(code, timeout=timeout), approve_all=approve_all)

    async def cancel(self) -> None:
        """Cancel the running execution (if any): interrupt it and reject its pending approvals."""
        if self._execution is not None:
            await self._execution.cancel()

    async def reset(self) -> None:
        """Fresh kernel state; the generated API is kept and MCP servers restart on their next call."""
        self._check_running()
        await self.cancel()
        assert self._kernel is not None
        await self._kernel.restart()
        self._stale_modules.clear()
        self._host_stale = False
        await self._registry.restart()

    # --- for the owner of shared tools (Sessions, the service) -----------------------------

    @property
    def approval(self) -> ApprovalPolicy:
        """The approval policy: which calls need a decision (set it to change how later calls are
        decided, e.g. the service narrowing its rules for a client)."""
        return self._gate.policy

    @approval.setter
    def approval(self, policy: ApprovalPolicy) -> None:
        check_policy(policy)
        self._gate.policy = policy

    @property
    def shared_tools(self) -> SharedTools | None:
        """The MCP tools this executor uses without owning them (``CodeExecutor(shared_tools=...)``)."""
        return self._shared

    def attach_server(self, registered: RegisteredServer) -> None:
        """Make a server whose API its owner generated into the shared ``api_root`` usable."""
        self._servers[registered.name] = registered
        self._stale_modules.add(registered.package.module)
        if self._kernel is not None:
            self._kernel.install_package(
                f"{self.api_root.name}/{registered.package.module}", registered.package.path
            )

    def delegate_registration(self, registrar: Registrar) -> None:
        """Send this executor's :meth:`register_mcp_server` calls to ``registrar`` (its owner, who
        connects the server and calls :meth:`attach_server`)."""
        self._registrar = registrar

    def move_workspace(self, path: Path) -> None:
        """Rename the workspace directory to ``path``. The running kernel keeps it (its working
        directory and a sandbox's bind follow the directory, not its name); kernels started later
        (restarts) start in ``path``."""
        os.rename(self.workspace, path)
        self.workspace = path
        if isinstance(self._kernel, Kernel):
            self._kernel.relocate(self._kernel_config())

    # --- internals --------------------------------------------------------------------------

    async def _write_host_tools(self) -> None:
        """(Re)generate the kernel's ``agent_tools`` package from the host tools."""
        assert self._runtime_dir is not None
        root = self._runtime_dir / HOST_ROOT
        root.mkdir(exist_ok=True)  # before the kernel starts: a sandbox shows only what exists then
        package = await asyncio.to_thread(write_host_package, self._host_tools, root)
        if self._kernel is not None:
            if package is not None:
                self._kernel.install_package(HOST_SERVER, package.path)
            elif self._host_package is not None:
                self._kernel.uninstall_package(HOST_SERVER)
        if package is not None or self._host_package is not None:
            self._host_stale = True
        self._host_package = package

    def _check_own_servers(self) -> None:
        if self._shared is not None:
            raise ConfigError(
                "this executor's MCP servers are shared by its Sessions: register servers in the "
                "Sessions template (Sessions(mcp_servers=...))"
            )

    def _check_running(self) -> None:
        if self._state == "closed":
            raise ExecutorClosed("the executor is closed")
        if self._state != "running" and self._state != "starting":
            raise RuntimeError(
                "the executor is not started: use `async with CodeExecutor(...)` or `await start()`"
            )

    def _finished(self, execution: Execution) -> None:
        if self._execution is execution:
            self._execution = None
        if self._shared is not None and self._shared.finished is not None:
            self._shared.finished(self)

    async def _interrupt(self) -> None:
        if self._kernel is not None:
            await self._kernel.interrupt()

    def _server_configs(self) -> dict[str, Mapping[str, Any] | McpServerConfig]:
        servers = self._initial_servers
        if servers is None:
            return {}
        if isinstance(servers, (str, os.PathLike)):
            return dict(load_mcp_config(Path(servers), environ=self._mcp_env))
        return dict(servers)

    def _kernel_environment(self) -> dict[str, str]:
        """``kernel_env`` plus where and how the kernel's code reaches the (started) tool server."""
        assert self._toolserver is not None
        return {
            **self._kernel_env,
            "IPYBOX_TOOL_SERVER": self._toolserver.address,
            "IPYBOX_TOOL_TOKEN": self._toolserver.token,
        }

    def _kernel_config(self) -> KernelConfig:
        assert self._runtime_dir is not None
        launcher = None
        if self.sandbox is not None:
            socket_path = self._runtime_dir / "tools.sock"
            launcher = sandbox_launcher(self.sandbox, workspace=self.workspace, sockets=[socket_path])
        return KernelConfig(
            cwd=self.workspace,
            env=self._kernel_environment(),
            python_path=[self._runtime_dir / HOST_ROOT, self.api_root.parent],
            hidden_frame_paths=[self.api_root, self._runtime_dir / HOST_ROOT],
            launcher=launcher,
            shell_approval=self._approve_shell,
            output_limit=self._output_limit,
            reset_cwd=self._reset_cwd,
        )

    async def _start_gateway_kernel(self, gateway: GatewayConfig) -> GatewayKernel:
        """Tool server on TCP where the remote kernel can reach it, then the kernel on the gateway
        (the generated packages are shipped into it rather than found in the workspace)."""
        assert self._toolserver is not None
        await self._toolserver.start_tcp(
            gateway.tool_server_host,
            gateway.tool_server_port,
            advertise_host=gateway.tool_server_advertise,
            certfile=gateway.tool_server_certfile,
            keyfile=gateway.tool_server_keyfile,
        )
        env_files = {}
        if gateway.tool_server_ca:
            try:
                env_files["IPYBOX_TOOL_CA"] = Path(gateway.tool_server_ca).read_text(encoding="utf-8")
            except OSError as exc:
                raise ConfigError(f"cannot read tool_server_ca {gateway.tool_server_ca}: {exc}") from None
        config = KernelConfig(
            env=self._kernel_environment(),
            shell_approval=self._approve_shell,
            output_limit=self._output_limit,
            reset_cwd=self._reset_cwd,
        )
        return await GatewayKernel.start(gateway, config, env_files=env_files)

    async def _drive(
        self,
        code: str,
        timeout: float | None,
        wall_timeout: float | None,
        emit: Emit,
        execution: Execution,
        *,
        backstop: bool,
    ) -> ExecutionResult:
        assert self._kernel is not None
        kernel = self._kernel
        deadline = None
        if timeout is not None or wall_timeout is not None:
            deadline = Deadline(math.inf if timeout is None else timeout, wall_seconds=wall_timeout)
        waiting: set[object] = set()  # the approval requests' ids and questions the deadline waits on
        surfacing: set[asyncio.Future[None]] = set()
        marks: list[str | None] = [None]  # the output mark of the code's last MCP call
        asking: list[ElicitationRequest] = []  # questions of this execution not answered yet

        def hold(key: object) -> None:
            if deadline is not None and not waiting:
                deadline.pause()
            waiting.add(key)

        def release(key: object) -> None:
            waiting.discard(key)
            if deadline is not None and not waiting:
                deadline.resume()

        def on_decided(request: ApprovalRequest) -> None:
            release(request.id)

        def on_request(request: ApprovalRequest) -> None:
            hold(request.id)
            request.add_done_callback(on_decided)
            task = asyncio.ensure_future(surface(request))
            surfacing.add(task)
            task.add_done_callback(surfacing.discard)

        async def surface(request: ApprovalRequest) -> None:
            # The code printed something before it asked: hand that out first.
            await kernel.output_reached(request.output_mark)
            if request.pending:
                emit(request)
                if backstop and self.abandon_after is not None:
                    _backstop(request, execution, self.abandon_after)

        async def ask(question: ElicitationRequest) -> ElicitationAnswer:
            question._stream()
            hold(id(question))
            asking.append(question)
            delay = self.abandon_after
            timer = None
            if delay is not None:  # the backstop: a question nobody answers does not hold the kernel
                reason = UNANSWERED_AFTER.format(delay=delay)
                timer = asyncio.get_running_loop().call_later(delay, question.decline_unanswered, reason)
            try:
                await kernel.output_reached(marks[0])  # what the code printed before its call first
                if question.pending:  # (not declined by the end of the execution meanwhile)
                    emit(question)
                return await question._wait()
            finally:
                if timer is not None:
                    timer.cancel()
                asking.remove(question)
                release(id(question))

        def before_call(request: ApprovalRequest) -> str | Awaitable[str | None] | None:
            if request.kind == "mcp":
                marks[0] = request.output_mark
            check = execution.before_call
            return check(request) if check is not None else None

        def on_call(request: ApprovalRequest, decision: ApprovalDecision, outcome: CallOutcome) -> None:
            if request.kind == "mcp":
                emit(ToolCall(request, decision, outcome))

        if self._stale_modules or self._host_stale:
            await self._refresh_modules()
        self._gate.listen(on_request)
        self._gate.observe(before_call, on_call)
        self._asking = ask
        try:
            collector = OutputCollector(self._output_limit)
            async with contextlib.aclosing(self._kernel.execute(code, deadline)) as events:
                async for event in events:
                    collector.add(event)
                    if isinstance(event, StreamText):
                        emit(OutputChunk(event.text, event.name))
                    elif isinstance(event, DisplayData):
                        emit(DisplayOutput(event.data, event.metadata))
        finally:
            self._gate.listen(None)
            self._gate.observe(None, None)
            self._asking = None
            for question in asking:
                question.decline_unanswered(ENDED)
        output = collector.output()
        return ExecutionResult(
            text=output.text,
            images=list(output.images),
            error=output.error,
            displays=[DisplayOutput(d.data, d.metadata) for d in output.displays],
            execution_count=output.execution_count,
            omitted_chars=output.omitted_chars,
        )

    async def ask_in_execution(self, question: ElicitationRequest) -> ElicitationAnswer:
        """Ask the running execution's reader ``question`` (an :class:`ElicitationRequest` event of it,
        as for an MCP server's question without ``mcp_elicit``); declined when nothing runs."""
        ask = self._asking
        if ask is None:
            return ElicitationAnswer("decline", reason=NO_EXECUTION)
        return await ask(question)

    async def _refresh_modules(self) -> None:
        """Make re-generated API modules importable in the running kernel."""
        assert self._kernel is not None
        code = "".join(
            kernel_reload_code(module, self.api_root.name) for module in sorted(self._stale_modules)
        )
        if self._host_stale:
            code += host_reload_code()
        self._stale_modules.clear()
        self._host_stale = False
        with contextlib.suppress(KernelDied):
            await self._kernel.run(code, silent=True)


def _record_end(record: EndedCalls, call_id: str, execution: Execution) -> None:
    """Remember why the execution of ``call_id`` ended, for a reattach that finds nothing: what it
    failed with, else whoever answered its last approval (or that the approval expired)."""
    decision = execution.last_decision
    if execution.error is not None:
        record.record(call_id, execution.error)
    elif decision is not None and decision.decided_by == TIMEOUT:
        record.record(call_id, expired(decision.reason or "nobody answered in time"))
    elif decision is not None:
        record.record(call_id, ApprovalError(decided_by=decision.decided_by))


def _backstop(request: ApprovalRequest, execution: Execution, delay: float) -> None:
    """Cancel ``execution`` if ``request`` is still undecided after ``delay`` seconds."""
    loop = asyncio.get_running_loop()

    def expire() -> None:
        if request.pending and not execution.done:
            task = loop.create_task(execution.cancel(ABANDONED_AFTER.format(delay=delay)))
            _expiring.add(task)
            task.add_done_callback(_expiring.discard)

    timer = loop.call_later(delay, expire)
    request.add_done_callback(lambda _: timer.cancel())


_expiring: set[asyncio.Task[None]] = set()


async def run_to_end(execution: Execution, *, approve_all: bool) -> ExecutionResult:
    """``execute()`` of every executor: ``execution`` run to its end, each call the policy leaves to a
    decision accepted (``approve_all``) or rejected with :class:`ConfigError` naming the fix. An MCP
    server's question is declined (``approve_all`` too: content is the user's to give)."""
    result: ExecutionResult | None = None
    async with execution:
        async for event in execution:
            if isinstance(event, ApprovalRequest):
                if not approve_all:
                    await event.reject("execute() has no one to ask (approve_all=False)")
                    raise ConfigError(NO_APPROVER.format(name=event.name))  # leaving cancels the code
                await event.accept()
            elif isinstance(event, ElicitationRequest):
                event.decline_unanswered(NO_ONE_TO_ASK)
            elif isinstance(event, ExecutionResult):
                result = event
    assert result is not None
    return result


def _gateway_config(gateway: str | GatewayConfig | None, token: str | None) -> GatewayConfig | None:
    if gateway is None or isinstance(gateway, GatewayConfig):
        if token is not None:
            raise ConfigError("gateway_token needs kernel_gateway as a URL (GatewayConfig has a token field)")
        return gateway
    return GatewayConfig(url=gateway, token=token)


def _short_tmp() -> str:
    """A directory whose paths stay well below the 107-byte unix socket path limit."""
    for candidate in (os.environ.get("XDG_RUNTIME_DIR"), "/tmp"):
        if candidate and os.path.isdir(candidate) and len(candidate) < 40 and os.access(candidate, os.W_OK):
            return candidate
    return tempfile.gettempdir()
