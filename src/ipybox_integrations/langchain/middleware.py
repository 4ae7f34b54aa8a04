"""``CodeActionMiddleware``: ipybox's ``execute_code`` tool and its prompt for ``create_agent``."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from langchain.agents.middleware import AgentMiddleware, AgentState, ModelRequest, ModelResponse
from langchain.agents.middleware.types import ExtendedModelResponse
from langchain_core.messages import AIMessage, SystemMessage
from langgraph.runtime import Runtime

from ipybox_integrations._session import Conversations, SessionSource
from ipybox_integrations.langchain._agent_hitl import HumanInTheLoop
from ipybox_integrations.langchain._agent_tools import AgentTools, AgentToolSelection
from ipybox_integrations.langchain._history import abandoned_calls, close_abandoned_calls, finished_results
from ipybox_integrations.langchain._hitl import DecisionName, Describe, InterruptMode
from ipybox_integrations.langchain._sessions import CANCELLED_REASON, thread_of
from ipybox_integrations.langchain._settings import ApprovalCallback, ToolSettings
from ipybox_integrations.langchain.tool import build_execute_code_tool, tool_settings

ModelCallResult = ModelResponse[Any] | AIMessage | ExtendedModelResponse[Any]


class CodeActionMiddleware(AgentMiddleware[AgentState[Any], Any, Any]):
    """Makes a ``create_agent`` agent act by writing Python: ``middleware=[CodeActionMiddleware(executor)]``.

    ``executor`` is one executor whose kernel every thread shares, or an ``ipybox_core.Sessions``
    (or ``RemoteSessions``) giving each LangGraph ``thread_id`` its own kernel. Registers the
    ``execute_code`` tool (see :func:`execute_code_tool` for the approval flow and the parameters)
    and appends the code-execution guide plus the MCP tools' ``api_reference()`` to the system
    prompt the agent already has (recomputed for every model call, so servers registered later
    show up). Set ``prompt=False`` to leave the system prompt alone.

    ``agent_tools``: the agent's own tools the code can call, as typed functions
    (``from agent_tools import <tool>``, in the prompt's API reference): every ``BaseTool`` the
    agent gives its model (``execute_code`` excluded) by default (``None``/``True``), none
    (``False``), the named ones (a list of names or of the tools themselves) or those a predicate
    takes. A call runs here, in the
    application, as the agent's ``ToolNode`` runs it (``ToolRuntime``, ``InjectedState``,
    ``InjectedStore`` and ``InjectedToolCallId`` injected from the ``execute_code`` call); a
    ``ToolException`` (or the tool's ``handle_tool_error`` message) reaches the code as
    ``ToolError``. Over ``RemoteSessions`` a call runs in the worker process whose invocation drives
    the execution at that moment; a worker that may resume a thread before its first model call
    (several workers) needs the tools themselves: ``agent_tools=tools``.

    ``human_in_the_loop``: the agent's ``HumanInTheLoopMiddleware`` (the same object you put into
    ``middleware=``). Its ``interrupt_on`` then decides the code's calls of agent tools that the
    executor's approval policy leaves to the application: a gated tool interrupts like a held MCP
    call (its ``allowed_decisions`` and ``description``, its ``when`` predicate), any other runs
    without asking; its ``interrupt_mode`` is the default of ``interrupt_mode``. Without it, every
    such call is asked like an MCP call.

    ``elicitation=True``: an MCP server's question during a call of the code is an ``interrupt()``
    whose value is ``{"elicitation": {...}}``, answered with ``Command(resume={"action": "accept",
    "content": {...}})`` (or ``decline`` / ``cancel``); see :func:`execute_code_tool`. Off by
    default: the question is declined, as an app that knows only approval interrupts expects.

    When new input arrives on a thread whose ``execute_code`` still waits for an approval, that
    execution is cancelled (also in an ipybox service, whichever process started it): the
    conversation moved on, and the call's tool message tells the model so. Use the agent
    asynchronously (``ainvoke``/``astream``).
    """

    def __init__(
        self,
        executor: SessionSource,
        *,
        approval_callback: ApprovalCallback | None = None,
        allowed_decisions: Sequence[DecisionName] = ("approve", "reject"),
        describe: Describe | None = None,
        timeout: float | None = None,
        abandon_after: float | None = None,
        prompt: bool = True,
        reference_max_chars: int | None = None,
        interrupt_mode: InterruptMode | None = None,
        agent_tools: AgentToolSelection = None,
        human_in_the_loop: HumanInTheLoop | None = None,
        elicitation: bool = False,
    ) -> None:
        super().__init__()
        self.conversations = Conversations(executor)
        self._agent_tools = AgentTools(
            agent_tools, hosts=hasattr(executor, "register_host_tools"), human_in_the_loop=human_in_the_loop
        )
        if interrupt_mode is None:
            interrupt_mode = human_in_the_loop.interrupt_mode if human_in_the_loop is not None else "batched"
        self.prompt = prompt
        self.reference_max_chars = reference_max_chars
        self._settings: ToolSettings = tool_settings(
            executor,
            approval_callback=approval_callback,
            allowed_decisions=allowed_decisions,
            describe=describe,
            timeout=timeout,
            abandon_after=abandon_after,
            interrupt_mode=interrupt_mode,
            agent_tools=self._agent_tools,
            elicitation=elicitation,
        )
        self.tools = [build_execute_code_tool(self._settings)]

    def prompt_section(self) -> str:
        """The text appended to the system prompt."""
        return self.conversations.prompt_section(max_chars=self.reference_max_chars)

    @property
    def suspended(self) -> int:
        """How many ``execute_code`` calls this middleware left waiting for a decision (all threads)."""
        return len(self._settings.waiting)

    async def cancel_suspended(self, *, thread_id: str | None = None, reason: str | None = None) -> int:
        """Cancel the executions waiting for a decision, returns how many: those of ``thread_id``
        (whichever tool instance or process left them waiting), or all that this middleware left."""
        reason = reason or CANCELLED_REASON
        if thread_id is None:
            return await self._settings.waiting.cancel(reason)
        return await self._cancel_thread(thread_id, reason)

    async def _cancel_thread(self, thread_id: str, reason: str | None) -> int:
        self._settings.notes.forget(lambda key: key[0] == thread_id)
        return await self._settings.waiting.cancel_conversation(thread_id, reason=reason)

    async def aclose(self) -> None:
        """Cancel the executions waiting for a decision (closing the executor is the application's job)."""
        await self.cancel_suspended()

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ModelCallResult:
        return handler(self._with_prompt(request))

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelCallResult:
        # The tools the model gets this turn are the ones the code can call (and the prompt lists).
        await self._agent_tools.sync(self.conversations.source, request.tools)
        return await handler(self._with_prompt(request))

    def before_agent(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        return None  # synchronous runs cannot start execute_code, so nothing can be left waiting

    async def abefore_agent(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        # Runs for new input only, never when a run is resumed: whatever still waits here was
        # abandoned (in this process, or in the ipybox service). Its call gets a result saying so.
        thread_id, tool = thread_of(), self.tools[0].name
        results = {}
        if thread_id:
            calls = abandoned_calls(state["messages"], tool)
            results = await finished_results(self._settings.source, thread_id, calls)
            await self._cancel_thread(thread_id, None)  # the executor's reason: the conversation moved on
        return close_abandoned_calls(state["messages"], tool, results)

    def _with_prompt(self, request: ModelRequest[Any]) -> ModelRequest[Any]:
        if not self.prompt:
            return request
        section = self.prompt_section()
        current = request.system_message
        blocks: list[Any] = (
            [*current.content_blocks, {"type": "text", "text": f"\n\n{section}"}]
            if current is not None
            else [{"type": "text", "text": section}]
        )
        return request.override(system_message=SystemMessage(content=blocks))
