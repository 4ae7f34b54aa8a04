"""Proxy tools: how one MCP call made by the code appears to the Agents SDK.

Each MCP tool of the executor gets a :class:`~agents.FunctionTool` in the hidden kernel agent, named
like the MCP tool and namespaced by its server, so an interruption's ``item.tool_name`` is the MCP
tool's name, ``item.tool_namespace`` its server and ``item.arguments`` the call's arguments. The
proxy never performs the call itself: running its body means "approved" and accepts the held
:class:`~ipybox_core.ApprovalRequest`; the kernel then makes the call. A proxy never raises (a
raising nested tool leaves the outer run stuck on a stale interruption).

An executor of an ipybox service (``RemoteSessions``) has no tool list in this process: its proxies
are learned from the approval requests themselves (server, tool), as they arrive.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Awaitable, Callable
from typing import Any, TypeAlias

from agents import FunctionTool, RunContextWrapper, tool_namespace
from agents.tool_context import ToolContext

from ipybox_core.approval import ApprovalRequest, CallOutcome
from ipybox_core.errors import ApprovalError
from ipybox_core.executor.contract import ToolSummaries
from ipybox_integrations._outcomes import outcome_error
from ipybox_integrations.openai_agents._invocation import current_invocation

McpApprovalPolicy: TypeAlias = Callable[[RunContextWrapper[Any], ApprovalRequest], "bool | Awaitable[bool]"]
"""Decides per MCP call whether to ask the user: ``(run context, request) -> True`` asks.

``run_context.context`` is the application's context passed to ``Runner.run(..., context=...)``.
"""

SHELL_TOOL = "shell"
_ANY_ARGUMENTS: dict[str, Any] = {"type": "object", "properties": {}, "additionalProperties": True}


def proxy_identity(server: str, tool: str, *, shell: bool = False) -> tuple[str, str | None]:
    """The ``(tool name, namespace)`` an MCP call is shown under.

    The MCP tool's name in its server's namespace; when both are equal (a namespace named like its
    tool is reserved by the SDK) the name is qualified instead: ``"weather.weather"``. Shell
    commands are the bare tool ``shell``.
    """
    if shell:
        return SHELL_TOOL, None
    if server == tool:
        return f"{server}.{tool}", None
    return tool, server


def request_identity(request: ApprovalRequest) -> tuple[str, str | None]:
    """:func:`proxy_identity` of a held call."""
    return proxy_identity(request.server, request.tool, shell=request.kind == "shell")


HostApproval: TypeAlias = Callable[[str, str], Any]
"""``(server, tool)`` -> the agent tool's own ``needs_approval`` (``None``: not an agent tool)."""


class ProxyTools:
    """The kernel agent's proxy tools, rebuilt when the executor's MCP servers change.

    A call of one of the agent's own tools (server ``agent_tools``) is shown with that tool's own
    ``needs_approval`` (``host_approval``) instead of the MCP policy.
    """

    def __init__(
        self,
        needs_approval: bool | McpApprovalPolicy,
        host_approval: HostApproval = lambda server, tool: None,
    ) -> None:
        self._policy = needs_approval
        self._host_approval = host_approval
        self._signature: tuple[tuple[str, str], ...] | None = None
        self._identities: set[tuple[str, str | None]] = set()
        self._learned: dict[str, dict[str, str]] = {}
        """Tools of a service's executor seen in approval requests: server -> tool -> description."""
        self.tools: list[FunctionTool] = []

    def sync(self, tools: ToolSummaries) -> bool:
        """Rebuild :attr:`tools` if the executor's tools changed; True when they did."""
        signature = tuple(sorted((server, tool) for server, named in tools.items() for tool in named))
        if signature == self._signature:
            return False
        self._build(
            {
                server: {tool: f"{server}.{tool}: {summary}" for tool, summary in named.items()}
                for server, named in tools.items()
            }
        )
        self._signature = signature
        return True

    def invalidate(self) -> None:
        """Rebuild :attr:`tools` at the next :meth:`sync` (the agent tools' approvals changed)."""
        self._signature = None

    def learn(self, request: ApprovalRequest) -> bool:
        """Add a proxy for ``request``'s tool (an executor whose tool list is not known here, in an
        ipybox service); True when :attr:`tools` changed."""
        if self.knows(request):
            return False
        if request.kind != "shell":
            tools = self._learned.setdefault(request.server, {})
            tools[request.tool] = f"{request.server}.{request.tool}: MCP tool of the ipybox service"
        self._build(self._learned)
        return True

    def _build(self, servers: dict[str, dict[str, str]]) -> None:
        """The shell proxy, then one proxy per MCP tool (server -> tool -> description)."""
        tools = [self._proxy(SHELL_TOOL, "Run a shell command (!cmd or %%bash) from the code.")]
        identities: set[tuple[str, str | None]] = {(SHELL_TOOL, None)}
        for server in sorted(servers):
            grouped: list[FunctionTool] = []
            for tool, description in servers[server].items():
                name, namespace = proxy_identity(server, tool)
                identities.add((name, namespace))
                proxy = self._proxy(name, description, self._host_approval(server, tool))
                (grouped if namespace is not None else tools).append(proxy)
            if grouped:
                tools.extend(tool_namespace(name=server, description=f"MCP server {server}", tools=grouped))
        self._identities = identities
        self.tools = tools

    def host_approval(self, request: ApprovalRequest) -> Any:
        """The agent tool's ``needs_approval`` for a call of it from the code (``None``: not one)."""
        return None if request.kind == "shell" else self._host_approval(request.server, request.tool)

    def knows(self, request: ApprovalRequest) -> bool:
        """True if a proxy exists for ``request`` (its server may be newer than the tool list)."""
        return request_identity(request) in self._identities

    def _proxy(self, name: str, description: str, own: Any = None) -> FunctionTool:
        policy = own if own is not None else self._needs_approval if callable(self._policy) else self._policy
        return FunctionTool(
            name=name,
            description=description,
            params_json_schema=_ANY_ARGUMENTS,
            on_invoke_tool=self._approved,
            strict_json_schema=False,
            needs_approval=policy,
        )

    async def _needs_approval(
        self, context: RunContextWrapper[Any], params: dict[str, Any], call_id: str
    ) -> bool:
        request = _shown(call_id)
        if request is None or not callable(self._policy):
            return False  # nothing is waiting: the body reports the lost call without side effects
        verdict = self._policy(context, request)
        if inspect.isawaitable(verdict):
            verdict = await verdict
        return bool(verdict)

    async def _approved(self, context: ToolContext[Any], arguments: str) -> str:
        """Runs when the call was approved (or needed no approval): let the kernel make the call."""
        request = _shown(context.tool_call_id)
        if request is None:
            return "not executed: the execution that made this call no longer exists"
        try:
            await request.accept()
        except ApprovalError as error:
            return f"not executed: {error}"
        # The span's output is what the MCP call returned (where it is reported).
        return outcome_text(await request.outcome())


def outcome_text(outcome: CallOutcome | None) -> str:
    """A proxy's output: the call's result (JSON of its structured content, else its text), or
    the error the code saw; ``"approved"`` where the outcome is not reported."""
    if outcome is None:
        return "approved"
    if not outcome.ok:
        return outcome_error(outcome)
    if outcome.structured is not None:
        return json.dumps(outcome.structured, default=str, ensure_ascii=False)
    return outcome.text


def _shown(call_id: str) -> ApprovalRequest | None:
    """The request the current ``execute_code`` invocation showed under the nested ``call_id``."""
    invocation = current_invocation()
    return invocation.request(call_id) if invocation is not None else None
