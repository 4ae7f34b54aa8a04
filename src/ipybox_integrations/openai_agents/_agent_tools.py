"""The agent's own ``FunctionTool``s, callable from the code as ``from agent_tools import <tool>``.

Each selected tool of the agent becomes an ipybox :class:`~ipybox_core.hosttools.HostTool` of the
executor: the kernel gets a typed function generated from the tool's JSON schema, and a call from
the code passes the executor's approval policy, then (when held) the tool's own ``needs_approval``
through the SDK (see ``ProxyTools``), then runs here, in the application, with a ``ToolContext`` of
the run that made the ``execute_code`` call. The tool's ``failure_error_function`` makes the
message of the ``ToolError`` the code gets (the SDK's default formatter unless the tool set one;
``None``: the exception's own message). Its input and output guardrails run too; a refusal
(``reject_content`` or ``raise_exception``) is a ``ToolError`` for the code, not the end of the run.

The tools of the agent's MCP servers (``Agent(mcp_servers=[...])``) are offered too, as the SDK
lists them for the run (see ``_mcp_tools``): a call goes through the server object, with the
server's ``require_approval`` as its ``needs_approval`` and the server's guardrails and failure
formatter. A name both a function tool and an MCP tool use stays the function tool's; the MCP
tool's is numbered (``add_2``, as code generation numbers clashing names).
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import json
import typing
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

from agents import FunctionTool, RunContextWrapper
from agents.tool import maybe_invoke_function_tool_failure_error_function
from agents.tool_context import ToolContext
from agents.tool_guardrails import ToolInputGuardrailData, ToolOutputGuardrailData
from pydantic import TypeAdapter

from ipybox_core.codegen._names import NameScope
from ipybox_core.errors import ToolError
from ipybox_core.hosttools import HOST_SERVER, HostCall, HostTool
from ipybox_integrations._agent_tools import AgentToolRun, check_selection, pick, register_agent_tools
from ipybox_integrations.openai_agents._mcp_tools import CallStopped, McpTool, call_mcp_tool, list_mcp_tools

AgentToolSelection: TypeAlias = "bool | Sequence[str] | Callable[[FunctionTool], bool] | None"
"""Which of the agent's tools (function tools, its MCP servers' tools) the code can call: ``None``
(default: all), ``True`` (all), ``False`` (none), tool names (as the code imports them), or a
predicate over the ``FunctionTool`` (an MCP tool's is the SDK's conversion, whose
``agents.tool.get_function_tool_origin(tool).type`` is ``ToolOriginType.MCP``)."""

ToolApproval: TypeAlias = "bool | Callable[[RunContextWrapper[Any], dict[str, Any], str], Awaitable[bool]]"
"""A ``FunctionTool.needs_approval``."""

_calls = itertools.count(1)


@dataclass(frozen=True)
class Offered:
    """One tool of the agent the code can call, under ``name``."""

    name: str
    tool: FunctionTool
    mcp: McpTool | None = None
    """Where an MCP tool's calls go (``None``: a function tool of the agent)."""

    def host_tool(self) -> HostTool:
        if self.mcp is None:
            return _host_tool(self.tool)
        return _mcp_host_tool(self.name, self.mcp)


class AgentTools:
    """The agent's tools the code calls, registered as host tools of the executor."""

    def __init__(self, selection: AgentToolSelection, *, hosts: bool, exclude: Callable[[Any], bool]) -> None:
        self._selection = check_selection(selection, hosts=hosts)
        self._exclude = exclude
        self._approvals: dict[str, ToolApproval] = {}
        self._mcp: list[McpTool] = []
        self._syncing = asyncio.Lock()

    async def select(self, agent: Any, context: Any = None) -> list[Offered]:
        """The agent's tools the selection takes (never ``execute_code`` itself): its function
        tools, then its MCP servers' tools as listed for the run of ``context``."""
        if self._selection is False or agent is None:
            return []
        tools = [
            t for t in getattr(agent, "tools", ()) if isinstance(t, FunctionTool) and not self._exclude(t)
        ]
        self._mcp = await list_mcp_tools(agent, context, self._mcp)
        names = NameScope(tool.name for tool in tools)
        offered = [Offered(tool.name, tool) for tool in tools]
        offered += [Offered(names.claim(mcp.tool.name), mcp.tool, mcp) for mcp in self._mcp]
        selection = self._selection
        if callable(selection):  # a predicate over FunctionTools
            return [offer for offer in offered if selection(offer.tool)]
        return pick(offered, selection, lambda offer: offer.name)

    async def sync(self, source: Any, agent: Any, context: Any = None) -> bool:
        """Register ``agent``'s selected tools with ``source`` if what it serves differs; True when
        they were registered (see :func:`register_agent_tools`)."""
        if getattr(source, "register_host_tools", None) is None:
            return False
        # One registration per change: runs of one agent started together (two users' first turns)
        # must not each register and each rebuild the kernel agent's tools under the other's run.
        async with self._syncing:
            offered = await self.select(agent, context)
            self._approvals = {offer.name: offer.tool.needs_approval for offer in offered}
            return await register_agent_tools(source, [offer.host_tool() for offer in offered])

    def approval(self, server: str, tool: str) -> ToolApproval | None:
        """The ``needs_approval`` of an agent tool called from the code (``None``: not one)."""
        return self._approvals.get(tool) if server == HOST_SERVER else None


def _host_tool(tool: FunctionTool) -> HostTool:
    async def run(call: HostCall) -> Any:
        return await invoke(tool, call)

    return HostTool(
        name=tool.name,
        run=AgentToolRun(run, id(tool)),
        description=tool.description,
        input_schema=_kernel_schema(tool.params_json_schema),
        output_schema=_output_schema(tool),
        timeout=tool.timeout_seconds,
    )


def _mcp_host_tool(name: str, mcp: McpTool) -> HostTool:
    async def run(call: HostCall) -> Any:
        return await invoke(mcp.tool, call, lambda context: call_mcp_tool(mcp, context, call.arguments))

    schema = mcp.input_schema
    return HostTool(
        name=name,
        run=AgentToolRun(run, mcp.signature()),
        description=mcp.tool.description,
        input_schema=_kernel_schema(mcp.tool.params_json_schema) if schema is None else schema,
        output_schema=mcp.output_schema,
        read_only=mcp.read_only,
        timeout=mcp.tool.timeout_seconds,
    )


async def invoke(
    tool: FunctionTool, call: HostCall, does: Callable[[ToolContext[Any]], Awaitable[Any]] | None = None
) -> Any:
    """Run ``tool`` as the SDK would, in a ``ToolContext`` of the run bound for the execution
    (``does``: what the call does instead of the tool's own invocation, e.g. an MCP call)."""
    outer = call.context if isinstance(call.context, RunContextWrapper) else None
    arguments = json.dumps(call.arguments, ensure_ascii=False)
    run: dict[str, Any] = {}
    if outer is not None:
        run = {"usage": outer.usage, "agent": getattr(outer, "agent", None)}
        run["run_config"] = getattr(outer, "run_config", None)
    context: ToolContext[Any] = ToolContext(
        context=outer.context if outer is not None else None,
        tool_name=tool.name,
        tool_call_id=f"ipybox-agent-tool-{next(_calls)}",
        tool_arguments=arguments,
        **run,
    )
    # The SDK's invoker turns an exception into the model's error string; the code gets ToolError
    # with that string instead, so the invocation runs without it and the formatter is applied here.
    unhandled = getattr(tool.on_invoke_tool, "_invoke_tool_impl", None)
    try:
        agent: Any = context.agent  # the run's agent (the SDK's data types want an Agent)
        await _guard(tool, tool.tool_input_guardrails, ToolInputGuardrailData(context, agent))
        if does is not None:
            output = await does(context)
        elif unhandled is None:
            output = await tool.on_invoke_tool(context, arguments)
        else:
            output = await unhandled(context, arguments)
        data = ToolOutputGuardrailData(context, agent, output)
        await _guard(tool, tool.tool_output_guardrails, data)
        return output
    except CallStopped as stopped:
        raise ToolError(str(stopped), server=HOST_SERVER, tool=call.tool) from None
    except Exception as error:
        message = None
        if unhandled is not None or does is not None:
            message = await maybe_invoke_function_tool_failure_error_function(
                function_tool=tool, context=context, error=error
            )
        raise ToolError(
            message or str(error) or type(error).__name__, server=HOST_SERVER, tool=call.tool
        ) from error


def _kernel_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """The tool's parameters for the kernel: a strict schema lists every parameter as required and
    drops a ``None`` default, so a nullable one gets ``None`` back as its default (it is still sent)."""
    properties = schema.get("properties")
    if not isinstance(properties, dict):
        return schema
    restored = {
        name: {**prop, "default": None}
        for name, prop in properties.items()
        if name in schema.get("required", ())
        and isinstance(prop, dict)
        and "default" not in prop
        and _nullable(prop)
    }
    return {**schema, "properties": {**properties, **restored}} if restored else schema


def _nullable(prop: dict[str, Any]) -> bool:
    kind = prop.get("type")
    return (
        kind == "null"
        or (isinstance(kind, list) and "null" in kind)
        or any(isinstance(option, dict) and option.get("type") == "null" for option in prop.get("anyOf", ()))
    )


async def _guard(tool: FunctionTool, guardrails: Sequence[Any] | None, data: Any) -> None:
    """Run the tool's input or output guardrails as the SDK would: ``reject_content`` and
    ``raise_exception`` both stop the call (the code gets ``ToolError``; the run goes on)."""
    for guardrail in guardrails or ():
        behavior = (await guardrail.run(data)).behavior
        if behavior["type"] == "reject_content":
            raise CallStopped(behavior["message"])
        if behavior["type"] == "raise_exception":
            raise CallStopped(f"guardrail {guardrail.get_name()!r} of tool {tool.name!r} stopped the call")


def _output_schema(tool: FunctionTool) -> dict[str, Any] | None:
    """The tool's output schema: declared, else from its function's return annotation (``None``:
    unknown, the code gets the value as JSON data)."""
    if tool.output_json_schema is not None:
        return tool.output_json_schema
    try:
        function = tool.__wrapped__
        annotation = typing.get_type_hints(function).get("return", inspect.Signature.empty)
    except Exception:  # not made by function_tool, or unresolvable annotations
        return None
    if annotation in (inspect.Signature.empty, Any, type(None)):
        return None
    try:
        return TypeAdapter(annotation).json_schema()
    except Exception:  # not a JSON type (e.g. the SDK's output objects)
        return None
