"""The agent's own LangChain tools, callable from the code as ``from agent_tools import <tool>``.

Each selected tool the agent gives its model (the tools of ``create_agent``, any ``BaseTool``:
``@tool`` functions, ``StructuredTool``, tools from langchain-mcp-adapters) becomes an ipybox
:class:`~ipybox_core.hosttools.HostTool` of the executor: the kernel gets a typed function
generated from the tool's JSON schema (the one the model sees), and a call from the code passes
the executor's approval policy, then the agent's ``HumanInTheLoopMiddleware`` settings (see
``_agent_hitl``), then runs here, in the application, through a LangGraph ``ToolNode`` with the
state, store, context and config of the ``execute_code`` call that made it: ``ToolRuntime``,
``InjectedState``, ``InjectedStore`` and ``InjectedToolCallId`` are injected as for a call of the
model. A ``ToolException`` (raised, or turned into an error message by the tool's
``handle_tool_error``) reaches the code as ``ToolError`` with that message.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import json
import logging
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

from langchain.tools import ToolRuntime
from langchain_core.messages import ToolCall, ToolMessage
from langchain_core.runnables import RunnableConfig, ensure_config
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.prebuilt import ToolNode
from langgraph.types import Command
from pydantic import TypeAdapter

from ipybox_core.approval import ApprovalRequest
from ipybox_core.errors import ToolError
from ipybox_core.hosttools import HOST_SERVER, HostCall, HostTool
from ipybox_integrations._agent_tools import (
    NO_APPROVAL,
    AgentToolRun,
    bind_run,
    check_selection,
    pick,
    register_agent_tools,
)
from ipybox_integrations._session import Executor
from ipybox_integrations.langchain._agent_hitl import HumanInTheLoop, gated_review, let_through_by_policy
from ipybox_integrations.langchain._hitl import TOOL_NAME, Review

AgentToolSelection: TypeAlias = "bool | Sequence[str | BaseTool] | Callable[[BaseTool], bool] | None"
"""Which of the agent's tools the code can call: ``None`` (default: all), ``True`` (all), ``False``
(none), tool names or the tools themselves (known then before this process's first model call, as a
worker that resumes a thread needs them), or a predicate."""

COMMAND_MESSAGE = (
    "the agent's tool {name!r} returned a Command (an update of the graph state), which a call "
    "from the code cannot apply: let the model call it directly"
)

_calls = itertools.count(1)
logger = logging.getLogger(__name__)
UNASKED_WARNING = (
    "the executor's approval policy lets the code call %s without asking: the agent's "
    "interrupt_on for them does not apply to calls from the code"
)


@dataclass(frozen=True)
class CallContext:
    """What the code's calls of agent tools run with: the ``execute_code`` call's ``ToolRuntime``
    (state, context, store) and its config (callbacks: the tool runs are its children)."""

    runtime: ToolRuntime | None
    config: RunnableConfig


def bind_context(executor: Executor, runtime: ToolRuntime | None) -> None:
    """Run the agent tools the executor's code calls from now on in this ``execute_code`` call."""
    bind_run(executor, CallContext(runtime, ensure_config()))


async def let_through(request: ApprovalRequest) -> None:
    """Approve a held call that the agent's ``interrupt_on`` does not gate (audit log:
    ``decided_by`` ``tool:no-approval``)."""
    if request.pending:
        await request.accept(decided_by=NO_APPROVAL)


class AgentTools:
    """The agent's tools the code calls, registered as host tools of the executor."""

    def __init__(
        self, selection: AgentToolSelection, *, hosts: bool, human_in_the_loop: HumanInTheLoop | None
    ) -> None:
        given: list[BaseTool] = []
        if isinstance(selection, Sequence) and not isinstance(selection, str):
            given = [tool for tool in selection if isinstance(tool, BaseTool)]
            selection = [tool.name if isinstance(tool, BaseTool) else tool for tool in selection]
        self._selection = check_selection(selection, hosts=hosts)
        self._given = given
        self.human_in_the_loop = human_in_the_loop
        self._tools: dict[str, BaseTool] = {}
        self._syncing = asyncio.Lock()

    def select(self, tools: Sequence[BaseTool | dict[str, Any]]) -> list[BaseTool]:
        """The tools the selection takes (never ``execute_code`` itself, nor provider tools); the
        tools given to ``agent_tools=`` as objects are taken even where the model was not given them."""
        found = [tool for tool in tools if isinstance(tool, BaseTool) and tool.name != TOOL_NAME]
        names = {tool.name for tool in found}
        found += [tool for tool in self._given if tool.name not in names]
        return pick(found, self._selection, lambda tool: tool.name)

    async def prepare(self, source: object) -> None:
        """Before a resumed ``execute_code`` call that no model call of this process preceded (a
        worker that resumes a thread first thing): register the tools given as objects, so the
        calls its code makes run here."""
        if not self._tools and self._given:
            await self.sync(source, [])

    async def sync(self, source: object, tools: Sequence[BaseTool | dict[str, Any]]) -> bool:
        """Register the selected ``tools`` with ``source`` if what it serves differs; True when they
        were registered (see :func:`register_agent_tools`)."""
        if self._selection is False or getattr(source, "register_host_tools", None) is None:
            return False
        selected = self.select(tools)
        self._tools = {tool.name: tool for tool in selected}
        node = ToolNode(selected, handle_tool_errors=False) if selected else None
        async with self._syncing:  # one registration per change, however many runs start at once
            wanted = [_host_tool(tool, node) for tool in selected] if node is not None else []
            if not await register_agent_tools(source, wanted):
                return False
        self._warn_unasked(source)
        return True

    def _warn_unasked(self, source: object) -> None:
        if self.human_in_the_loop is None:
            return
        policy = getattr(source, "approval", None)  # a CodeExecutor's (Sessions keep theirs)
        unasked = let_through_by_policy(policy, self.human_in_the_loop, list(self._tools))
        if unasked:
            logger.warning(UNASKED_WARNING, ", ".join(unasked))

    def review(
        self, request: ApprovalRequest, runtime: ToolRuntime | None, fallback: Review
    ) -> Review | None:
        """How a held call of an agent tool is asked (``None``: it runs without asking): by the
        agent's ``HumanInTheLoopMiddleware`` when given, else like an MCP call (``fallback``)."""
        if self.human_in_the_loop is None:
            return fallback
        tool = self._tools.get(request.tool)
        return gated_review(self.human_in_the_loop, tool, request, runtime, fallback)


def _host_tool(tool: BaseTool, node: ToolNode) -> HostTool:
    function = convert_to_openai_tool(tool)["function"]
    return HostTool(
        name=tool.name,
        run=AgentToolRun(functools.partial(invoke, tool, node), id(tool)),
        description=tool.description,
        input_schema=function.get("parameters") or {"type": "object", "properties": {}},
        output_schema=_output_schema(tool),
    )


async def invoke(tool: BaseTool, node: ToolNode, call: HostCall) -> Any:
    """Run ``tool`` as the agent's ``ToolNode`` would, in the ``execute_code`` call bound for the
    execution: its state, store and context are injected where the tool declares them."""
    tool_call = ToolCall(
        name=tool.name, args=dict(call.arguments), id=f"ipybox-agent-tool-{next(_calls)}", type="tool_call"
    )
    context = call.context if isinstance(call.context, CallContext) else None
    if context is None or context.runtime is None:  # not inside a graph: nothing to inject
        output: Any = await tool.ainvoke(tool_call)
    else:
        payload = {"__type": "tool_call_with_context", "tool_call": tool_call, "state": context.runtime.state}
        output = await node.ainvoke(payload, context.config)
    return _result(tool, output)


def _result(tool: BaseTool, output: Any) -> Any:
    """The code's value of a tool's output: what the model would read, as JSON data when the
    tool's return annotation says so; an error message (``handle_tool_error``) is a ``ToolError``."""
    if isinstance(output, Mapping) and isinstance(output.get("messages"), list) and output["messages"]:
        output = output["messages"][-1]
    if not isinstance(output, ToolMessage):
        parts = output if isinstance(output, list) else [output]
        if any(isinstance(part, Command) for part in parts):
            raise ToolError(COMMAND_MESSAGE.format(name=tool.name), server=HOST_SERVER, tool=tool.name)
        return output
    if output.status == "error":
        raise ToolError(output.text or "the tool failed", server=HOST_SERVER, tool=tool.name)
    artifact = output.artifact
    if isinstance(artifact, Mapping) and artifact.get("structured_content") is not None:
        return artifact["structured_content"]  # an MCP tool's structured result (langchain-mcp-adapters)
    content = output.content
    if isinstance(content, str) and _decoded(tool):
        try:
            return json.loads(content)
        except ValueError:
            return content
    return content


def _return_annotation(tool: BaseTool) -> Any:
    """The return annotation of the tool's function (``None``: not known)."""
    if tool.response_format != "content":
        return None
    function = getattr(tool, "coroutine", None) or getattr(tool, "func", None)
    if function is None:
        return None
    try:
        return typing.get_type_hints(function).get("return")
    except Exception:  # unresolvable annotations
        return None


def _decoded(tool: BaseTool) -> bool:
    """True when the model's text of the tool's result is its value as JSON (not a string)."""
    annotation = _return_annotation(tool)
    if _output_schema(tool) is None:
        return False
    union = typing.get_origin(annotation) in (typing.Union, types.UnionType)
    return annotation is not str and not (union and str in typing.get_args(annotation))


def _output_schema(tool: BaseTool) -> dict[str, Any] | None:
    """The result's JSON schema, from the function's return annotation when its values reach the
    model as JSON (dicts, lists, numbers, strings, TypedDicts); ``None``: the code gets ``Any``."""
    annotation = _return_annotation(tool)
    if annotation is None or annotation is Any or not _plain_json(annotation):
        return None
    try:
        return TypeAdapter(annotation).json_schema()
    except Exception:
        return None


_JSON_TYPES = (str, int, float, bool, type(None))
_CONTAINERS = (dict, list, tuple, typing.Union, types.UnionType, typing.Literal, typing.Annotated)


def _plain_json(annotation: Any) -> bool:
    """True when LangChain writes values of ``annotation`` to the model as JSON (``json.dumps``:
    not pydantic models or dataclasses, which it writes as their ``str``)."""
    if annotation in _JSON_TYPES:
        return True
    if typing.is_typeddict(annotation):
        return all(_plain_json(value) for value in typing.get_type_hints(annotation).values())
    origin = typing.get_origin(annotation)
    if origin is typing.Literal:
        return True
    if origin is typing.Annotated:
        return _plain_json(typing.get_args(annotation)[0])
    if origin not in _CONTAINERS:
        return False
    return all(arg is Ellipsis or arg is Any or _plain_json(arg) for arg in typing.get_args(annotation))
