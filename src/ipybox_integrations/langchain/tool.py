"""The ``execute_code`` tool as a plain LangChain ``BaseTool``, for graphs built by hand."""

from __future__ import annotations

from collections.abc import Sequence

from langchain.tools import ToolRuntime
from langchain_core.tools import BaseTool, StructuredTool

from ipybox_integrations._session import EXECUTE_CODE_DESCRIPTION, SessionSource
from ipybox_integrations.langchain._agent_tools import AgentTools
from ipybox_integrations.langchain._callback import run_with_callback
from ipybox_integrations.langchain._checkpoint import interrupts_available
from ipybox_integrations.langchain._content import ContentBlocks, error_content
from ipybox_integrations.langchain._graph import run_in_graph
from ipybox_integrations.langchain._hitl import (
    TOOL_NAME,
    DecisionName,
    Describe,
    InterruptMode,
    check_decisions,
    check_mode,
    default_description,
)
from ipybox_integrations.langchain._sessions import thread_of
from ipybox_integrations.langchain._settings import ApprovalCallback, ToolSettings


def execute_code_tool(
    executor: SessionSource,
    *,
    approval_callback: ApprovalCallback | None = None,
    allowed_decisions: Sequence[DecisionName] = ("approve", "reject"),
    describe: Describe | None = None,
    timeout: float | None = None,
    abandon_after: float | None = None,
    interrupt_mode: InterruptMode = "batched",
    elicitation: bool = False,
) -> BaseTool:
    """The ``execute_code`` tool: runs Python in a kernel, each MCP call approved by a human.

    ``executor`` is one executor (every thread shares its kernel) or an ``ipybox_core.Sessions``
    (or ``RemoteSessions``): then each LangGraph ``thread_id`` gets its own kernel, and a thread
    whose kernel was closed meanwhile (idle timeout, eviction) gets the restart notice first.

    Inside a LangGraph graph with a checkpointer, every MCP call the code makes is an ``interrupt()``
    whose value is a ``HITLRequest`` (one action, named ``server.tool``); resume with
    ``Command(resume={"decisions": [{"type": "approve"}]})`` (or ``reject`` with a ``message``, or
    ``edit`` with ``edited_action`` when ``allowed_decisions`` includes it). Elsewhere (plain
    ``tool.ainvoke``, no checkpointer) ``approval_callback`` gets the same ``HITLRequest`` and returns
    the ``HITLResponse``. With ``interrupt_mode="per_call"`` (as ``HumanInTheLoopMiddleware``'s),
    each interrupt's value is a ``ToolApprovalRequest`` instead, answered with one decision keyed
    by the interrupt's id (``Command(resume={interrupt.id: {"type": "approve"}})``) or plain; an
    agent whose HITL middleware runs ``per_call`` gets one shape in every pause. The tool is async only.

    ``timeout`` bounds each execution (default: the executor's; time waiting for a decision does not
    count). The backstop for an approval nobody answers belongs to where the execution lives (the
    in-process executor's ``abandon_after``, 15 minutes; the service's ``--approval-timeout`` for
    ``RemoteSessions``); ``abandon_after`` (seconds) cancels a call left waiting that long sooner.

    ``elicitation=True``: an MCP server's question during a call of the code (an executor without
    ``mcp_elicit``) is an ``interrupt()`` too, its value ``{"elicitation": {"server", "tool",
    "message", "schema" or "url", "tool_call_id"}}``, resumed with ``{"action": "accept",
    "content": {...}}``, ``{"action": "decline"}`` or ``{"action": "cancel"}``; content the schema
    refuses is asked again with ``"error"`` saying why. Off (the default), or outside a graph with a
    checkpointer, the question is declined and the code's stderr says so.
    """
    return build_execute_code_tool(
        tool_settings(
            executor,
            approval_callback=approval_callback,
            allowed_decisions=allowed_decisions,
            describe=describe,
            timeout=timeout,
            abandon_after=abandon_after,
            interrupt_mode=interrupt_mode,
            elicitation=elicitation,
        )
    )


def tool_settings(
    executor: SessionSource,
    *,
    approval_callback: ApprovalCallback | None,
    allowed_decisions: Sequence[DecisionName],
    describe: Describe | None,
    timeout: float | None,
    abandon_after: float | None,
    interrupt_mode: InterruptMode,
    agent_tools: AgentTools | None = None,
    elicitation: bool = False,
) -> ToolSettings:
    """The checked settings of one ``execute_code`` tool (see :func:`execute_code_tool`)."""
    return ToolSettings(
        source=executor,
        allowed_decisions=check_decisions(allowed_decisions),
        approval_callback=approval_callback,
        describe=describe or default_description,
        timeout=timeout,
        abandon_after=abandon_after,
        interrupt_mode=check_mode(interrupt_mode),
        agent_tools=agent_tools,
        elicitation=elicitation,
    )


def build_execute_code_tool(settings: ToolSettings) -> BaseTool:
    """The ``execute_code`` tool for ``settings``."""

    async def execute_code(code: str, runtime: ToolRuntime = None) -> ContentBlocks:  # type: ignore[assignment]
        if runtime is not None and interrupts_available():
            return await run_in_graph(settings, code, runtime)
        thread_id = thread_of(runtime.config if runtime is not None else None)
        return await run_with_callback(settings, code, thread_id, runtime)

    return StructuredTool.from_function(
        func=_sync_unsupported,
        coroutine=execute_code,
        name=TOOL_NAME,
        description=EXECUTE_CODE_DESCRIPTION,
        handle_tool_error=error_content,
    )


def _sync_unsupported(code: str, runtime: ToolRuntime = None) -> ContentBlocks:  # type: ignore[assignment]
    raise NotImplementedError(
        "execute_code is async only: run the agent with `await agent.ainvoke(...)` or `agent.astream(...)`"
    )
