"""``CodeAction``: the capability that turns a PydanticAI agent into a code-acting agent."""

from __future__ import annotations

import asyncio
import dataclasses
import os
from collections.abc import AsyncIterable, Mapping
from types import TracebackType
from typing import Any

from pydantic_ai import AgentRunResult, AgentStreamEvent, DeferredToolRequests, RunContext, Tool, ToolReturn
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.messages import ModelRequest
from pydantic_ai.tools import AgentDepsT
from pydantic_ai.toolsets import FunctionToolset

from ipybox_core.executor import CodeExecutor
from ipybox_core.mcp import McpServerConfig
from ipybox_core.sandbox import SandboxPolicy
from ipybox_integrations._session import EXECUTE_CODE_DESCRIPTION, Conversations, Executor, SessionSource
from ipybox_integrations.pydantic_ai._agent_tools import AgentTools, AgentToolSelection
from ipybox_integrations.pydantic_ai._deferred_events import documented_events
from ipybox_integrations.pydantic_ai._execute import CodeRunner, ConversationKey
from ipybox_integrations.pydantic_ai.approvals import named_requests

TOOL_NAME = "execute_code"


class CodeAction(AbstractCapability[AgentDepsT]):
    """Gives an agent the ``execute_code`` tool, backed by a :class:`CodeExecutor` or by ``Sessions``.

    ``CodeAction(executor)`` uses an executor you start and close (one kernel for every
    conversation); ``CodeAction(sessions)`` (an ``ipybox_core.Sessions``) gives each conversation its
    own kernel. The conversation is ``key(ctx)``, by default PydanticAI's ``ctx.conversation_id``: the
    ``conversation_id=`` passed to ``agent.run``, else the one recorded on ``message_history``, else a
    fresh one per run. Pass e.g. ``key=lambda ctx: ctx.deps.user_id`` to choose it yourself.
    ``CodeAction(mcp_servers=...,
    workspace=..., sandbox=...)`` creates one (keyword arguments go to :class:`CodeExecutor`), started
    on the first run and closed by ``aclose()`` / ``async with code_action:``.

    The instructions explain the kernel and list the MCP tools' Python API
    (``executor.api_reference()``, recomputed before every model request). Every MCP call the code
    makes is a PydanticAI approval: decided inline by a handler capability (``HandleDeferredToolCalls``,
    ``RequestInput``, ...) when the agent has one, otherwise deferred — the run ends with
    ``DeferredToolRequests`` while the kernel waits: each approval there is named after the MCP
    call and answered the PydanticAI way (``True``, ``ToolApproved(override_args=...)``,
    ``ToolDenied(message)``), or with :func:`approval_results`.

    The waiting execution belongs to its executor, not to this object: a ``CodeAction`` built anew
    for each request (around the same executor or sessions) resumes it from the deferred answer.
    An answer bound to another held call's ``approval_id`` is ignored. When a new prompt arrives
    while the call waits, a run of the same conversation no longer carries it (a new history), or
    the run that parked it fails (e.g. ``DeferredToolRequests`` is not an output type), the
    execution is cancelled at once: the MCP call never runs and the model is told so.

    ``timeout`` bounds each execution (default: the executor's; waiting for a decision does not
    count). The backstop for an approval nobody answers belongs to where the execution lives: a
    ``CodeExecutor``'s ``abandon_after`` (15 minutes), the service's ``--approval-timeout`` for
    ``RemoteSessions``; pass ``abandon_after`` (seconds) to have this capability cancel a deferred
    call sooner. :meth:`cancel_suspended` and :meth:`aclose` interrupt what still waits.

    ``agent_tools``: the agent's own tools the code can call, as typed functions (``from
    agent_tools import <tool>``, in the prompt's API reference): every function tool and toolset
    tool of the run step (its MCP toolsets' too, after ``prepare``) by default (``None``/``True``),
    none (``False``), the named ones (a list) or those a predicate on the ``ToolDefinition`` takes;
    never ``execute_code``. A call runs here, in the application, with a ``RunContext`` of the run
    (``ctx.deps``); ``requires_approval=True`` or ``ApprovalRequired`` asks like an MCP call of the
    code (inline or deferred, named after the tool, server ``agent_tools``); a tool that asks
    nothing runs at once; ``ModelRetry`` or any error reaches the code as ``ToolError`` with its
    message (not counted against the tool's retries). Over ``RemoteSessions`` a call runs in the
    worker process whose run drives the execution at that moment.

    ``elicitation=True``: an MCP server's question during a call of the code (an executor without
    ``mcp_elicit``) is a PydanticAI question, ``CallDeferred(kind="question")``, named after the MCP
    tool that asks, the question (server, message, ``schema`` or ``url``) under
    ``metadata[id]["elicitation"]``. A handler capability answers it inline, or the run ends with it
    in ``DeferredToolRequests.calls`` while the kernel waits; either way the answer goes in
    ``DeferredToolResults.calls``: the form's values (a dict) accept, ``{"action": "decline"}`` /
    ``{"action": "cancel"}`` say no. Content the form's schema refuses asks again, with ``error``.
    Off (the default), the question is declined and the code's stderr says why.
    """

    def __init__(
        self,
        executor: SessionSource | None = None,
        *,
        key: ConversationKey | None = None,
        mcp_servers: Mapping[str, Mapping[str, Any] | McpServerConfig] | str | os.PathLike[str] | None = None,
        workspace: str | os.PathLike[str] | None = None,
        sandbox: bool | SandboxPolicy | str | os.PathLike[str] | None = None,
        timeout: float | None = None,
        abandon_after: float | None = None,
        reference_max_chars: int | None = None,
        id: str | None = None,
        agent_tools: AgentToolSelection = None,
        elicitation: bool = False,
        **executor_options: Any,
    ) -> None:
        if executor is not None and (
            mcp_servers is not None or workspace is not None or sandbox is not None or executor_options
        ):
            raise TypeError("pass either an executor or the options to create one, not both")
        if executor is None:
            options: dict[str, Any] = {
                "mcp_servers": mcp_servers,
                "sandbox": sandbox or False,
                **executor_options,
            }
            if workspace is not None:
                options["workspace"] = workspace
            self._owned: CodeExecutor | None = CodeExecutor(**options)
            source: SessionSource = self._owned
        else:
            self._owned, source = None, executor
        self.id = id
        self.description = None
        self.defer_loading = False
        self.conversations = Conversations(source)
        self.executor: Executor | None = source if isinstance(source, Executor) else None
        """The one executor every conversation uses (``None`` when given ``Sessions``)."""
        self.reference_max_chars = reference_max_chars
        self._agent_tools = AgentTools(agent_tools, hosts=hasattr(source, "register_host_tools"))
        self._runner = CodeRunner(
            self.conversations,
            tool_name=TOOL_NAME,
            key=key,
            timeout=timeout,
            abandon_after=abandon_after,
            agent_tools=self._agent_tools,
            elicitation=elicitation,
        )
        self._start_lock = asyncio.Lock()
        self._started = self._owned is None
        self._toolset = FunctionToolset[Any](
            [
                Tool(
                    self._execute_code,
                    name=TOOL_NAME,
                    description=EXECUTE_CODE_DESCRIPTION,
                    sequential=True,
                    takes_ctx=True,
                )
            ],
            id=f"ipybox_code_action{'_' + id if id else ''}",
        )

    # --- lifecycle --------------------------------------------------------------------------

    async def start(self) -> None:
        """Start the executor this capability created (no-op for an executor passed in)."""
        async with self._start_lock:
            if not self._started and self._owned is not None:
                await self._owned.start()
                self._started = True

    async def aclose(self) -> None:
        """Interrupt suspended executions; close the executor if this capability created it."""
        await self.cancel_suspended()
        if self._owned is not None:
            await self._owned.aclose()

    async def __aenter__(self) -> CodeAction[AgentDepsT]:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    @property
    def suspended(self) -> int:
        """How many calls this capability left waiting for a deferred approval."""
        return len(self._runner.waiting)

    async def cancel_suspended(self, *, conversation: str | None = None, reason: str | None = None) -> int:
        """Interrupt executions waiting for a decision (e.g. the user left); returns how many.

        Without ``conversation``: those this capability left waiting. With it: everything that
        waits in that conversation (its ``key``), whichever instance or process left it.
        """
        return await self._runner.cancel(reason, conversation=conversation)

    # --- identity: one instance is one kernel, never equal to another -----------------------

    def __eq__(self, other: object) -> bool:
        return self is other

    def __hash__(self) -> int:
        return id(self)

    def __repr__(self) -> str:
        if self._owned is None:
            return f"CodeAction({self.conversations.source!r})"
        return f"CodeAction(workspace={str(self._owned.workspace)!r}, servers={sorted(self._owned.servers)})"

    # --- capability hooks -------------------------------------------------------------------

    @classmethod
    def get_serialization_name(cls) -> str | None:
        return None

    def get_toolset(self) -> FunctionToolset[Any]:
        return self._toolset

    def get_instructions(self) -> Any:
        return self._instructions

    async def before_run(self, ctx: RunContext[AgentDepsT]) -> None:
        await self.start()
        await self._runner.cancel_abandoned(ctx)

    async def on_run_error(self, ctx: RunContext[AgentDepsT], *, error: BaseException) -> Any:
        await self._runner.cancel_run(ctx)
        raise error

    async def before_node_run(self, ctx: RunContext[AgentDepsT], *, node: Any) -> Any:
        return await self._runner.before_node(ctx, node)

    async def after_run(
        self, ctx: RunContext[AgentDepsT], *, result: AgentRunResult[Any]
    ) -> AgentRunResult[Any]:
        # A deferred approval reads as the MCP call it holds (name, arguments), keyed by the
        # execute_code call id PydanticAI resumes.
        if isinstance(result.output, DeferredToolRequests):
            return dataclasses.replace(result, output=named_requests(result.output))
        return result

    @property
    def has_wrap_run_event_stream(self) -> bool:
        # The wrapper only renames events for whoever consumes the stream; it must not make
        # PydanticAI stream a run nobody watches (that needs a model with streamed requests).
        return False

    async def wrap_run_event_stream(
        self, ctx: RunContext[AgentDepsT], *, stream: AsyncIterable[AgentStreamEvent]
    ) -> AsyncIterable[AgentStreamEvent]:
        # The calls the code holds appear as PydanticAI's DeferredToolRequestsEvent /
        # DeferredToolResultsEvent, as a native deferred tool's do.
        events = documented_events(stream)
        try:
            async for event in events:
                yield event
        finally:
            await events.aclose()

    async def after_node_run(self, ctx: RunContext[AgentDepsT], *, node: Any, result: Any) -> Any:
        # A deferred execute_code call answered with ToolDenied is not called again: interrupt its kernel.
        request = getattr(result, "request", None)
        parts = [*(request.parts if isinstance(request, ModelRequest) else ())]
        if ctx.messages and isinstance(ctx.messages[-1], ModelRequest):
            parts.extend(ctx.messages[-1].parts)
        await self._runner.cancel_denied(ctx, parts)
        return result

    # --- the tool ---------------------------------------------------------------------------

    async def _instructions(self, ctx: RunContext[Any]) -> str:
        await self.start()
        await self._agent_tools.sync(self.conversations.source, ctx)  # this step's tools
        section = self.conversations.prompt_section(max_chars=self.reference_max_chars)
        notes = self._runner.pending_notes(ctx)
        return "\n\n".join([section, *notes])

    async def _execute_code(self, ctx: RunContext[Any], code: str) -> ToolReturn | str:
        """Run Python code in the stateful kernel.

        Args:
            code: The Python code (an IPython cell: top-level await, `!cmd` and magics work).
        """
        await self.start()
        await self._agent_tools.sync(self.conversations.source, ctx)
        return await self._runner.execute_code(ctx, code)
