"""The agent's own tools, callable from the code as ``from agent_tools import <tool>``.

Each selected tool of the run step (a function tool, a toolset's tool, an MCP toolset's tool; after
``prepare``) becomes an ipybox :class:`~ipybox_core.hosttools.HostTool` of the executor: the kernel
gets a typed function generated from the tool's ``parameters_json_schema`` (and ``return_schema``).
A call from the code is held by the executor's approval gate like an MCP call; what the gate
leaves to the application (``approval="always"``, the default, or an ``ApprovalRules`` "ask") is
decided here, the PydanticAI way, by dispatching the call to the real tool through a one-tool
``ToolManager`` (:func:`dispatch_agent_tool_call`): ``requires_approval=True`` or an
``ApprovalRequired`` raised by the tool asks the run's handler capabilities, or defers like a held
MCP call; a tool that asks nothing runs at once. The tool runs in the application with a
``RunContext`` of the run (deps, retry, ``tool_call_approved``) and its result (or error) is what
the held call returns to the code. A call the executor's policy decides by itself (an allow rule,
``approval="never"``) runs when the tool server sends it, in the run bound for the execution
(:meth:`~ipybox_core.executor.CodeExecutor.bind_tool_context`), as approved.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections import defaultdict, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

from pydantic_ai import ApprovalRequired, CallDeferred, RunContext, ToolCallPart, ToolDenied, ToolReturn
from pydantic_ai.tool_manager import ToolManager
from pydantic_ai.tools import ToolDefinition
from pydantic_ai.toolsets import AbstractToolset
from pydantic_ai.toolsets.abstract import ToolsetTool
from pydantic_core import to_jsonable_python

from ipybox_core.approval import ApprovalRequest
from ipybox_core.errors import ApprovalError, ToolError
from ipybox_core.hosttools import HOST_SERVER, HostCall, HostTool
from ipybox_integrations._agent_tools import (
    NO_APPROVAL,
    AgentToolRun,
    bind_run,
    check_selection,
    pick,
    register_agent_tools,
)
from ipybox_integrations.pydantic_ai._deferred_events import announcing

AgentToolSelection: TypeAlias = "bool | Sequence[str] | Callable[[ToolDefinition], bool] | None"
"""Which of the agent's tools the code can call: ``None`` (default: all), ``True`` (all), ``False``
(none), tool names, or a predicate on the ``ToolDefinition``."""

NOT_RUNNING_MESSAGE = "the agent's tool {name!r} can only be called while the agent runs execute_code"
UNAVAILABLE_MESSAGE = "the agent's tool {name!r} is not available at this step of the run"
"""``decided_by`` (audit log) of an agent tool call the tool's own settings let through unasked."""
DEFAULT_CALL_TIMEOUT = 60.0
"""Bound of one call of a tool without its own ``timeout`` (ipybox's default ``call_timeout``)."""

_OWN_TOOLSETS = "ipybox_code_action"  # the id prefix of every CodeAction's toolset


def exposable(tool: ToolDefinition) -> bool:
    """A plain tool of the agent: a function (``requires_approval`` or not) no capability of ipybox
    contributed and without a typed part (tool search, ...)."""
    return (
        tool.kind in ("function", "unapproved")
        and tool.tool_kind is None
        and not (tool.toolset_id or "").startswith(_OWN_TOOLSETS)
    )


class AgentTools:
    """The agent's tools the code calls: selected per run step, registered as host tools."""

    def __init__(self, selection: AgentToolSelection, *, hosts: bool) -> None:
        self._selection = check_selection(selection, hosts=hosts)
        self._syncing = asyncio.Lock()
        self.results = HeldResults()

    def select(self, ctx: RunContext[Any]) -> dict[str, ToolsetTool[Any]]:
        """The tools of ``ctx``'s run step the selection takes (never ``execute_code`` itself)."""
        manager = ctx.tool_manager
        if self._selection is False or manager is None or manager.tools is None:
            return {}
        tools = [tool for tool in manager.tools.values() if exposable(tool.tool_def)]
        selection = self._selection
        if callable(selection):  # a predicate over ToolDefinitions
            tools = [tool for tool in tools if selection(tool.tool_def)]
            selection = True
        return {tool.tool_def.name: tool for tool in pick(tools, selection, lambda tool: tool.tool_def.name)}

    def tool(self, ctx: RunContext[Any], name: str) -> ToolsetTool[Any] | None:
        """The selected tool ``name`` of ``ctx``'s run step (``None``: not one now)."""
        return self.select(ctx).get(name)

    async def sync(self, source: Any, ctx: RunContext[Any]) -> bool:
        """Register the run step's selected tools with ``source`` if what it serves differs; True
        when they were registered (see :func:`register_agent_tools`)."""
        wanted = [self._host_tool(tool.tool_def) for tool in self.select(ctx).values()]
        async with self._syncing:  # one registration per change, also for runs started together
            return await register_agent_tools(source, wanted)

    def _host_tool(self, definition: ToolDefinition) -> HostTool:
        description, timeout = definition.description or "", call_timeout(definition)
        schemas = definition.parameters_json_schema, definition.return_schema or None
        key = json.dumps([description, *schemas, timeout], sort_keys=True, default=str)  # the run is shared
        return HostTool(
            name=definition.name,
            run=AgentToolRun(_run, key),
            description=description,
            input_schema=schemas[0],
            output_schema=schemas[1],
            timeout=timeout,
        )

    def bind(self, executor: Any, ctx: RunContext[Any]) -> None:
        """Hand ``ctx`` and this instance's held results to the calls of the execution ``executor``
        runs for this ``execute_code`` call (any instance's registered tools then serve them)."""
        bind_run(executor, BoundRun(ctx, self))


@dataclass(frozen=True)
class BoundRun:
    """What an execution's agent tool calls run in: the ``execute_code`` call's run, and the
    :class:`AgentTools` of the ``CodeAction`` that drives the execution (its held results)."""

    ctx: RunContext[Any]
    tools: AgentTools


async def _run(call: HostCall) -> Any:
    """The tool server sends an approved call: its outcome if decided by the driving ``CodeAction``,
    else (decided by the executor's policy alone: an allow rule, ``approval="never"``) run it now,
    as approved."""
    bound = call.context
    if not isinstance(bound, BoundRun):
        raise ToolError(NOT_RUNNING_MESSAGE.format(name=call.tool), server=HOST_SERVER, tool=call.tool)
    found, outcome = bound.tools.results.take(call.tool, call.arguments)
    if found:
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome
    tool = bound.tools.tool(bound.ctx, call.tool)
    if tool is None:
        raise ToolError(UNAVAILABLE_MESSAGE.format(name=call.tool), server=HOST_SERVER, tool=call.tool)
    part = ToolCallPart(call.tool, dict(call.arguments), tool_call_id=f"ipybox-agent-tool-{id(call)}")
    result = await dispatch_agent_tool_call(bound.ctx, tool, part, None, {}, approved=True)
    return _value(result)


class HeldResults:
    """What held calls came to, decided and run here, until the tool server asks for them.

    Keyed by tool and JSON arguments (the backend's call carries no more); calls with equal
    arguments take their results in order.
    """

    def __init__(self) -> None:
        self._held: defaultdict[tuple[str, str], deque[Any]] = defaultdict(deque)

    def put(self, tool: str, arguments: dict[str, Any], outcome: Any) -> None:
        self._held[(tool, _key(arguments))].append(outcome)

    def take(self, tool: str, arguments: dict[str, Any]) -> tuple[bool, Any]:
        key = (tool, _key(arguments))
        queue = self._held.get(key)
        if not queue:
            return False, None
        outcome = queue.popleft()
        if not queue:
            del self._held[key]
        return True, outcome

    def __len__(self) -> int:
        return sum(len(queue) for queue in self._held.values())


class AgentToolCall(AbstractToolset[Any]):
    """One call of an agent tool from the code, as the only tool of a toolset.

    Validation runs the real tool's validators and asks for approval the way PydanticAI would
    (``requires_approval`` / ``ApprovalRequired``, with ipybox's ``metadata``); running the tool
    runs the real one through the run's toolset, bounded by its timeout. With a held ``request``,
    the outcome (result or error) is kept for the tool server and the request accepted.
    """

    def __init__(
        self,
        ctx: RunContext[Any],
        tool: ToolsetTool[Any],
        request: ApprovalRequest | None,
        metadata: dict[str, Any],
        *,
        results: HeldResults | None = None,
        on_ask: Callable[[], Any] | None = None,
    ) -> None:
        manager = ctx.tool_manager
        assert manager is not None
        self.root = manager.toolset  # routes the call as the run would (prefixes, wrappers)
        self.real = tool
        self.request = request
        self.metadata = metadata
        self.results = results
        self.on_ask = on_ask
        self.asked = False
        self.timeout = call_timeout(tool.tool_def)
        definition = tool.tool_def
        self.tool_def = dataclasses.replace(
            definition, kind="function", metadata={**(definition.metadata or {}), "ipybox": metadata}
        )

    @property
    def id(self) -> str:
        return "ipybox_agent_tool_call"

    async def get_tools(self, ctx: RunContext[Any]) -> dict[str, ToolsetTool[Any]]:
        tool = dataclasses.replace(
            self.real, toolset=self, tool_def=self.tool_def, args_validator_func=self._validate
        )
        return {self.tool_def.name: tool}

    async def _ask(self, metadata: Any = None) -> ApprovalRequired:
        self.asked = True
        if self.on_ask is not None:
            await self.on_ask()
        extra = {"tool_metadata": metadata} if metadata is not None else {}
        return ApprovalRequired(metadata={**self.metadata, **extra})

    async def _validate(self, ctx: RunContext[Any], **arguments: Any) -> None:
        validator = self.real.args_validator_func
        if validator is not None:
            try:
                checked = validator(ctx, **arguments)
                if asyncio.iscoroutine(checked):
                    await checked
            except ApprovalRequired as asked:
                if not ctx.tool_call_approved:
                    raise await self._ask(asked.metadata) from None
        if self.real.tool_def.kind == "unapproved" and not ctx.tool_call_approved:
            raise await self._ask()

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any], tool: ToolsetTool[Any]
    ) -> Any:
        # The real tool, its own timeout left to ipybox's bound (the code gets ToolTimeoutError).
        real = dataclasses.replace(self.real, tool_def=dataclasses.replace(self.real.tool_def, timeout=None))
        outcome: Any
        try:
            async with asyncio.timeout(self.timeout):
                outcome = await self.root.call_tool(name, tool_args, ctx, real)
        except ApprovalRequired as asked:
            if not ctx.tool_call_approved and self.request is not None:
                raise await self._ask(asked.metadata) from None
            outcome = _error(name, "asked for approval again after its call was approved")
        except CallDeferred:
            outcome = _error(name, "deferred its call (CallDeferred): a call from code cannot be deferred")
        except TimeoutError:
            outcome = TimeoutError(f"the agent's tool {name!r} did not finish within {self.timeout:g} s")
        except Exception as error:  # ModelRetry, ToolFailed, any other: the code gets ToolError
            outcome = error
        if self.request is None:
            if isinstance(outcome, BaseException):
                raise outcome
            return outcome
        await self._deliver(ctx, tool_args, outcome)
        if isinstance(outcome, BaseException):
            raise outcome  # hooks and spans see the error; the held call carries it to the code
        return outcome

    async def _deliver(self, ctx: RunContext[Any], tool_args: dict[str, Any], outcome: Any) -> None:
        """Keep ``outcome`` for the tool server and let the held call through."""
        request, results = self.request, self.results
        assert request is not None
        assert results is not None
        held = request.args
        validated = to_jsonable_python(tool_args)
        edited = None if validated == held else validated  # an approver's edit (5 and 5.0 are equal)
        sent = held if edited is None else edited  # the arguments the tool server sends
        value = outcome if isinstance(outcome, BaseException) else _value(outcome)
        results.put(request.tool, sent, value)
        try:
            await request.accept(
                arguments=edited, decided_by="user" if ctx.tool_call_approved else NO_APPROVAL
            )
        except ApprovalError:  # the code stopped waiting, or the request expired meanwhile
            results.take(request.tool, sent)


async def dispatch_agent_tool_call(
    ctx: RunContext[Any],
    tool: ToolsetTool[Any],
    call: ToolCallPart,
    request: ApprovalRequest | None,
    metadata: dict[str, Any],
    *,
    approved: bool = False,
    results: HeldResults | None = None,
    on_ask: Callable[[], Any] | None = None,
) -> Any:
    """Put ``call`` of the agent's ``tool`` through PydanticAI's own call path (validation, approval,
    the run's handler capabilities and tool hooks), as a sandboxed call: a ``ModelRetry`` does not
    count against the tool's retries. Returns the result or ``ToolDenied``; raises
    ``ApprovalRequired`` when the call needs approval and no handler gave it.
    """
    toolset = AgentToolCall(ctx, tool, request, metadata, results=results, on_ask=on_ask)
    root = ctx.tool_manager.root_capability if ctx.tool_manager is not None else ctx.root_capability
    manager = ToolManager(toolset=toolset, root_capability=root, ctx=ctx, tools=await toolset.get_tools(ctx))
    return await manager.handle_call(
        call, approved=approved, wrap_validation_errors=False, **announcing(ctx, root)
    )


def call_timeout(definition: ToolDefinition) -> float:
    """The bound of one call from the code: the tool's own ``timeout``, else ipybox's default."""
    return definition.timeout if definition.timeout is not None else DEFAULT_CALL_TIMEOUT


def denied_message(result: Any) -> str | None:
    """The message of a ``ToolDenied`` result (``None`` for any other result)."""
    return result.message if isinstance(result, ToolDenied) else None


def _value(result: Any) -> Any:
    return result.return_value if isinstance(result, ToolReturn) else result


def _error(name: str, what: str) -> ToolError:
    return ToolError(f"the agent's tool {name!r} {what}", server=HOST_SERVER, tool=name)


def _key(arguments: dict[str, Any]) -> str:
    return json.dumps(arguments, sort_keys=True, ensure_ascii=False, default=str)
