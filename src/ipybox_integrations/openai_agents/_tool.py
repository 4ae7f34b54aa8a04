"""CodeActionTool: ipybox's ``execute_code`` for an Agents SDK agent, MCP calls approved as interruptions."""

from __future__ import annotations

import contextlib
import inspect
import json
import logging
import weakref
from collections.abc import Awaitable, Callable
from typing import Any, TypeAlias, cast

from agents import Agent, FunctionTool, RunConfig, RunContextWrapper, ToolApprovalItem
from agents.agent_tool_input import StructuredToolInputBuilderOptions
from agents.run_config import ToolErrorFormatterArgs
from agents.tool_context import ToolContext
from pydantic import BaseModel, Field

from ipybox_core.approval import ApprovalRequest
from ipybox_core.errors import ConfigError, ExecutionCancelled, ExecutionGone, IpyboxError, ServiceError
from ipybox_core.executor import ExecutionResult
from ipybox_core.hosttools import HOST_SERVER
from ipybox_integrations._agent_tools import bind_run
from ipybox_integrations._failures import error_text
from ipybox_integrations._notes import Notes
from ipybox_integrations._session import (
    ABANDONED_MESSAGE,
    DEFAULT_SESSION_KEY,
    EXECUTE_CODE_DESCRIPTION,
    Conversations,
    RenderedResult,
    SessionSource,
    approval_description,
    describe_failure,
    render_result,
    with_notes,
)
from ipybox_integrations._waiting import WaitingCalls, ended_text, found_again, not_waiting
from ipybox_integrations.openai_agents._agent_tools import AgentTools, AgentToolSelection
from ipybox_integrations.openai_agents._driver import PROXY_MISSING, EventHook, KernelDriver
from ipybox_integrations.openai_agents._invocation import (
    CALL_PREFIX,
    Invocation,
    canonical_call_id,
    current_invocation,
    invocation_scope,
    nested_call_id,
)
from ipybox_integrations.openai_agents._kernel_model import KernelModel
from ipybox_integrations.openai_agents._output import ImageDetail, noted_output, tool_output
from ipybox_integrations.openai_agents._proxies import McpApprovalPolicy, ProxyTools

logger = logging.getLogger(__name__)

CodeApprovalPolicy: TypeAlias = Callable[[RunContextWrapper[Any], dict[str, Any], str], Awaitable[bool]]
"""The SDK's ``needs_approval`` callable for execute_code: ``(context, {"code": ...}, call_id)``."""

Instructions: TypeAlias = Callable[[RunContextWrapper[Any], Agent[Any]], "str | Awaitable[str]"]
"""An ``Agent.instructions`` callable."""

ConversationKey: TypeAlias = Callable[[RunContextWrapper[Any]], "str | None"]
"""Maps a run to its conversation (and so its kernel), e.g. ``lambda ctx: ctx.context.user_id``."""


NO_KEY_MESSAGE = (
    "CodeActionTool({source}) needs key=: the Agents SDK does not show a tool the Session given to "
    "Runner.run, so without a key every conversation would share one kernel; pass e.g. "
    "key=lambda ctx: ctx.context['conversation'] with Runner.run(..., context=...)"
)
NESTED_MAX_TURNS = 100_000
"""Each MCP call that asks for approval is one turn of the nested kernel run (SDK default: 10)."""


class ExecuteCodeArgs(BaseModel):
    """Arguments of the ``execute_code`` tool."""

    code: str = Field(description="Python code to run in the stateful IPython kernel.")


class CodeActionTool(FunctionTool):
    """ipybox's ``execute_code`` tool for an OpenAI Agents SDK agent: ``Agent(tools=[code])``.

    ``CodeActionTool(executor)`` runs every conversation's code in that executor's one kernel;
    ``CodeActionTool(sessions, key=...)`` (an ``ipybox_core.Sessions`` or ``RemoteSessions``) gives
    each conversation its own kernel. The conversation is ``key(run_context)``, e.g.
    ``key=lambda ctx: ctx.context.user_id`` with ``Runner.run(..., context=...)``. The SDK does not
    show a tool the ``Session`` given to ``Runner.run``, so ``key`` is required with sessions (without
    it every conversation would share one kernel: :class:`ConfigError`); with one executor, runs
    without ``key`` are one conversation (``DEFAULT_SESSION_KEY``).

    The object is the SDK ``FunctionTool`` to put into ``Agent(tools=[...])`` (``tool`` is the
    same object, for ``tools=[code.tool]``); :meth:`instructions` composes the
    agent's instructions with the kernel guide and the MCP API reference. Each MCP call
    made by the code that the executor's approval policy leaves to the application surfaces as a
    regular ``ToolApprovalItem`` in ``result.interruptions`` (``item.tool_name`` is the MCP tool,
    ``item.tool_namespace`` its server, ``item.arguments`` the call's JSON arguments); decide it with
    ``state.approve(item)`` / ``state.reject(item, rejection_message=...)`` and resume with
    ``Runner.run(agent, state)``. A rejection raises ``PermissionError`` in the code.

    A new run of a conversation (``Runner.run(agent, input)``, not the waiting state) moves on: its
    first model call (through :meth:`instructions`) cancels the execution still waiting in that
    conversation, so the pending MCP call never runs, and the model is told on its next
    ``execute_code`` result. A conversation whose kernel was restarted (``Sessions`` idle timeout,
    ``close_session``) gets a restart notice in front of its next result.

    - ``agent_tools``: the agent's own function tools, and the tools of its ``mcp_servers``, that
      the code can call as typed functions
      (``from agent_tools import <tool>``, in the prompt's API reference): all of them by default
      (``None``/``True``), none (``False``), the named ones (a list) or those a predicate takes.
      A call runs here, in the application, with a ``ToolContext`` of the run; the tool's own
      ``needs_approval`` (bool or callable) decides whether it interrupts the run like an MCP call
      (``item.tool_namespace == "agent_tools"``); its exception reaches the code as ``ToolError``
      with the message of its ``failure_error_function``; its guardrails apply. An MCP tool's call
      goes through its server object (``require_approval`` applies as ``needs_approval``). Over
      ``RemoteSessions`` a call runs in the worker process whose run drives the execution at that
      moment.
    - ``needs_approval``: ``True`` (ask for every such call), ``False`` (accept them) or a callable
      ``(run_context, ApprovalRequest) -> bool`` (may be async) deciding per call.
    - ``code_needs_approval``: the SDK's standard ``needs_approval`` of the ``execute_code`` call
      itself (bool or ``(context, {"code": ...}, call_id) -> Awaitable[bool]``). With
      ``needs_approval=False`` this is the simple mode: one decision per code block.
    - ``on_event``: called with every execution event as it happens (``OutputChunk``,
      ``DisplayOutput``, ``ApprovalRequest``, ``ExecutionResult``), e.g. to show live output in a UI;
      the SDK itself does not stream approvals (they end the run as interruptions).
    - ``timeout``: bounds each execution (default: the executor's; waiting for a decision does not
      count).
    - ``abandon_after``: seconds after which this tool cancels an execution still waiting for a
      decision. By default the backstop belongs to where the execution lives: the in-process
      executor's ``abandon_after`` (15 minutes), the service's ``--approval-timeout`` for ``RemoteSessions``;
      :meth:`cancel_suspended` (or :meth:`aclose`) cancels waiting executions at once.

    With a ``Sessions`` or one executor, the execution waits in this process: resuming works while
    the kernel is alive, also from a ``RunState`` serialised to JSON; a state whose execution is
    gone resumes with a clear error message for the model instead of hanging. With
    ``RemoteSessions`` (an ipybox service) it waits in the service: another process can restore the
    ``RunState`` (``RunState.from_json(agent, ...)``), decide and resume it, and the code continues
    in the same kernel (same ``key``); a decision only answers the approval it was taken for.
    """

    def __init__(
        self,
        executor: SessionSource,
        *,
        key: ConversationKey | None = None,
        needs_approval: bool | McpApprovalPolicy = True,
        code_needs_approval: bool | CodeApprovalPolicy = False,
        name: str = "execute_code",
        description: str = EXECUTE_CODE_DESCRIPTION,
        timeout: float | None = None,
        abandon_after: float | None = None,
        on_event: EventHook | None = None,
        image_detail: ImageDetail = "auto",
        reference_max_chars: int | None = None,
        agent_tools: AgentToolSelection = None,
    ) -> None:
        self.conversations = Conversations(executor)
        self._agent_tools = AgentTools(
            agent_tools,
            hosts=hasattr(executor, "register_host_tools"),
            exclude=lambda tool: isinstance(tool, CodeActionTool),
        )
        if key is None and not executor.shares_kernel:
            raise ConfigError(NO_KEY_MESSAGE.format(source=type(executor).__name__))
        self.key = key
        self.image_detail: ImageDetail = image_detail
        self.reference_max_chars = reference_max_chars
        self._waiting = WaitingCalls(executor, abandon_after=abandon_after)
        self._shown: weakref.WeakValueDictionary[str, ApprovalRequest] = weakref.WeakValueDictionary()
        """The requests this tool showed as interruptions, while their executions hold them."""
        self._notes = Notes[str]()
        self._proxies = ProxyTools(needs_approval, self._agent_tools.approval)
        driver = KernelDriver(
            self._proxies,
            ask=needs_approval is not False,
            timeout=timeout,
            on_event=on_event,
            on_tools_changed=self._refresh_tools,
        )
        model = KernelModel(driver)
        # An explicit run config: the nested run would otherwise inherit the outer one, whose
        # RunConfig(model=...) would replace the kernel model with the LLM. A proxy missing from
        # the nested turn's tools (learned from a service's request during that turn) is reported
        # to the kernel model, which shows the call again (see KernelDriver).
        self._nested_config = RunConfig(
            model=model,
            workflow_name=f"ipybox {name}",
            tool_not_found_behavior="return_error_to_model",
            tool_error_formatter=_proxy_missing,
        )
        self._kernel_agent: Agent[Any] = Agent(name=f"{name}_ipybox_kernel", model=model)
        tool = self._kernel_agent.as_tool(
            tool_name=name,
            tool_description=description,
            parameters=ExecuteCodeArgs,
            input_builder=_nested_input,
            custom_output_extractor=cast(Any, self._extract),
            max_turns=NESTED_MAX_TURNS,
            run_config=self._nested_config,
            failure_error_function=None,
            needs_approval=code_needs_approval,
        )
        self._invoke_nested = tool.on_invoke_tool
        vars(self).update(vars(tool))  # this object is that tool: FunctionTool's fields
        self.on_invoke_tool = self._invoke

    @property
    def tool(self) -> FunctionTool:
        """This object: the ``execute_code`` tool (``tools=[code]`` and ``tools=[code.tool]`` agree)."""
        return self

    def __repr__(self) -> str:
        return f"CodeActionTool({self.conversations.source!r}, name={self.name!r})"

    def conversation_of(self, context: RunContextWrapper[Any]) -> str:
        """The conversation (kernel) of a run: ``key(context)``, else ``DEFAULT_SESSION_KEY``."""
        return (self.key(context) if self.key is not None else None) or DEFAULT_SESSION_KEY

    # --- prompt -----------------------------------------------------------------------------

    def prompt(self) -> str:
        """The kernel guide and the API reference of the MCP tools (recomputed each call)."""
        return self.conversations.prompt_section(max_chars=self.reference_max_chars)

    def instructions(self, base: str | Instructions | None = None) -> Instructions:
        """``Agent.instructions`` for ``base`` (a string or instructions callable) plus :meth:`prompt`.

        The result is a callable, so servers registered later appear in the next model call. It
        is also where a new run moves on: it cancels what still waits in the run's conversation.
        """

        async def compose(context: RunContextWrapper[Any], agent: Agent[Any]) -> str:
            notes = await self._move_on(self.conversation_of(context))
            await self._sync_agent_tools(agent, context)
            text = base(context, agent) if callable(base) else base
            if inspect.isawaitable(text):
                text = await text
            return "\n\n".join(part for part in (text, self.prompt(), *notes) if part)

        return compose

    # --- approvals --------------------------------------------------------------------------

    def is_code_approval(self, item: ToolApprovalItem) -> bool:
        """True if ``item`` asks to run a code block (``code_needs_approval``), not an MCP call."""
        return item.tool_name == self.name and item.tool_namespace is None

    def owns(self, item: ToolApprovalItem) -> bool:
        """True if this tool made the interruption: a code block to approve, or an MCP call of its code."""
        agent = getattr(item.agent, "name", None)
        return self.is_code_approval(item) or (
            agent == self._kernel_agent.name and (item.call_id or "").startswith(CALL_PREFIX)
        )

    def request_for(self, item: ToolApprovalItem) -> ApprovalRequest | None:
        """The held ipybox request behind an interruption (server, tool, args, annotations), if live."""
        return self._shown.get(canonical_call_id(item.call_id or ""))

    def describe(self, item: ToolApprovalItem) -> str:
        """A one-paragraph description of an interruption for a human approver."""
        if self.is_code_approval(item):
            try:
                code = str(json.loads(item.arguments or "{}").get("code", ""))
            except (json.JSONDecodeError, AttributeError):
                code = item.arguments or ""
            return f"The agent wants to run this code:\n{code}"
        request = self.request_for(item)
        agent_tool = item.tool_namespace == HOST_SERVER
        if request is not None and agent_tool:
            arguments = ", ".join(f"{key}={value!r}" for key, value in request.args.items())
            return f"The code calls the agent's tool {request.tool}({arguments})"
        if request is not None:
            return approval_description(request)
        if self.owns(item):
            kind = "the agent's tool" if agent_tool else "MCP tool"
            return f"The code calls {kind} {item.qualified_name}({item.arguments}) (held elsewhere)"
        return f"The agent calls the tool {item.qualified_name}({item.arguments})"

    @property
    def suspended(self) -> int:
        """How many calls this tool left waiting for a decision."""
        return len(self._waiting)

    async def cancel_suspended(self, *, reason: str | None = None, conversation: str | None = None) -> int:
        """Cancel the executions this tool left waiting for a decision (their pending calls are
        rejected), all or one ``conversation``'s; returns how many still waited."""
        return await self._waiting.cancel(reason, conversation=conversation)

    async def aclose(self) -> None:
        """Cancel the executions waiting for a decision (the executor is the application's to close)."""
        await self.cancel_suspended()

    async def _move_on(self, conversation: str) -> list[str]:
        """At a model call: cancel what still waits in ``conversation``; the notes not yet read."""
        if await self._waiting.cancel_conversation(conversation):  # any instance's, any process's
            self._notes.add(conversation, ABANDONED_MESSAGE)
        return self._notes.peek(conversation)

    # --- the tool's invocation --------------------------------------------------------------

    async def _invoke(self, context: ToolContext[Any], arguments: str) -> Any:
        conversation = self.conversation_of(context)
        await self._sync_agent_tools(context.agent, context)
        session = await self.conversations.session(conversation)
        notes = self._notes.take(conversation, session)
        tools = session.executor.tool_summaries()
        if tools is not None and self._proxies.sync(tools):
            self._refresh_tools()
        self._follow_tracing(context)
        invocation = Invocation(
            context.tool_call_id, conversation, session.executor, learns_tools=tools is None
        )
        self._waiting.resumed(conversation, invocation.call_id)
        await self._reattach(invocation)  # this or another instance (or process) left it waiting
        if invocation.execution is not None or not session.executor.busy:
            # the agent tools this invocation's code calls run in this run
            bind_run(session.executor, context)
        with invocation_scope(invocation):
            try:
                output = await self._invoke_nested(context, arguments)
            except Exception as error:
                logger.warning("execute_code failed: %s: %s", type(error).__name__, error)
                await self._abandon(invocation)
                return with_notes(notes, f"Error: execute_code failed ({type(error).__name__}: {error}).")
            except BaseException:
                await self._abandon(invocation)
                self._notes.put_back(conversation, notes)
                raise
        if invocation.waiting and invocation.shown is not None:  # the model sees its output later
            self._waiting.left(conversation, invocation.call_id)
            self._shown[nested_call_id(invocation.shown)] = invocation.shown
            self._notes.put_back(conversation, notes)
            return output
        await self._abandon(invocation, "execute_code returned before the code finished")
        return noted_output(notes, output)

    async def _extract(self, run_result: Any) -> Any:
        invocation = current_invocation()
        if invocation is None or invocation.rendered is None:
            return str(run_result.final_output or "")
        return tool_output(invocation.rendered, self.image_detail)

    async def _abandon(self, invocation: Invocation, reason: str = "execute_code failed") -> None:
        """Never leave code running once the tool returned, unless it waits for a decision."""
        if invocation.execution is not None and not invocation.execution.done:
            with contextlib.suppress(Exception):
                await invocation.execution.cancel(reason)

    async def _reattach(self, invocation: Invocation) -> None:
        """Pick up this call's execution if it waits in its executor (left there by this or another
        instance; over an ipybox service by any process) and where it stands: its question, or
        its result when it finished meanwhile (its approval expired and the code went on)."""
        try:
            found = await found_again(invocation.executor, invocation.call_id)
        except ExecutionGone as error:  # it ended while it waited (the service knows why)
            invocation.ended = ended_text(error)
            return
        except ServiceError as error:
            logger.warning("ipybox: could not ask the service for call %s: %s", invocation.call_id, error)
            invocation.service_error = error_text(error)
            return
        except ExecutionCancelled as error:  # cancelled meanwhile (moved on, abandoned): nothing waits
            invocation.ended = ended_text(error)
            return
        except IpyboxError as error:  # it timed out or its kernel died meanwhile: the model is told
            invocation.rendered = RenderedResult(describe_failure(error), images=[], failed=True)
            return
        if found is None:
            invocation.ended = await not_waiting(invocation.executor, invocation.call_id)
            return
        invocation.execution, stop = found
        if isinstance(stop, ExecutionResult):
            invocation.rendered = render_result(stop)
            return
        invocation.shown = stop
        if self._proxies.learn(stop):
            self._refresh_tools()

    async def _sync_agent_tools(self, agent: Any, context: RunContextWrapper[Any]) -> None:
        if await self._agent_tools.sync(self.conversations.source, agent, context):
            self._proxies.invalidate()

    def _refresh_tools(self) -> None:
        self._kernel_agent.tools = list(self._proxies.tools)

    def _follow_tracing(self, context: ToolContext[Any]) -> None:
        """Trace the nested run like the outer one (it has its own config, see __init__); without
        this, its spans would record MCP arguments even when the outer run excludes sensitive data."""
        outer = context.run_config
        if outer is not None:
            self._nested_config.tracing_disabled = outer.tracing_disabled
            self._nested_config.tracing = outer.tracing
            self._nested_config.trace_include_sensitive_data = outer.trace_include_sensitive_data


def _proxy_missing(args: ToolErrorFormatterArgs[Any]) -> str | None:
    """The nested run's output for a proxy not in the turn's tools (the SDK's default otherwise)."""
    if args.kind == "tool_not_found" and args.call_id.startswith(CALL_PREFIX):
        return PROXY_MISSING
    return None


def _nested_input(options: StructuredToolInputBuilderOptions) -> str:
    return json.dumps(options.get("params"))
