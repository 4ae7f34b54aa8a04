"""Agent tools over ``ipybox serve``: the code calls the application's own tools, which run in the
application process that holds the execution at that moment, once.

The application sends its tools' definitions with ``execute_code`` (``ipybox.dev/host_tools``);
:meth:`HostCalls.serve` generates the session kernel's ``agent_tools`` package from them. A call of
the code (past the approval gate, like an MCP call) waits here as a :class:`HandedCall`; the
execution's driver hands it to the client of the round it drives (an ``InputRequiredResult`` with
``ipybox.dev/host_call``), and the client's answer settles it. A call is handed out once: a
reattach while it is out is told that it runs elsewhere, and a process that took it and went away
leaves the code a :class:`~ipybox_core.errors.McpTimeout` after the tool's timeout (it may have
run), never a second run. A call nobody takes waits as long as an approval would.

A client whose execution checks each call before the policy decides it (``ipybox.dev/before_call``)
is asked the same way: the call waits here as a :class:`HandedCheck` until the client's answer
(``ipybox.dev/check``) lets it on or refuses it; one not answered in time is refused.

An MCP server's question to its user during a call of the code (an ``ElicitationRequest`` event
of the execution) goes to a client that takes questions (``ipybox.dev/questions``) the same way, as
a :class:`HandedQuestion` (``ipybox.dev/question``): a reattach is asked it again, the first answer
counts, and one a process took and never answered is declined after the approval timeout and
:data:`GRACE`.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import secrets
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ipybox_core import protocol
from ipybox_core.errors import ExecutionCancelled, McpTimeout, ToolError
from ipybox_core.hosttools import HOST_SERVER, HostCall
from ipybox_core.hosttools._wire import CallQuestion, outcome_value, tools_from_data
from ipybox_core.mcp.elicitation import ElicitationAnswer, ElicitationContentError, ElicitationRequest

if TYPE_CHECKING:
    from ipybox_core.approval import ApprovalRequest
    from ipybox_core.executor import CodeExecutor, Execution

GRACE = 5.0
"""Seconds a client that took a call gets beyond the tool's timeout to answer (the round trip)."""
CHECK_TIMEOUT = 10.0
"""Seconds (beyond :data:`GRACE`) a client that was handed a before-call check may take: the check
decides at once, so this is the round trip's time."""


@dataclass(eq=False)
class HandedCall:
    """One call of an agent tool that waits for the application to run it."""

    question: CallQuestion
    future: asyncio.Future[Any]
    taker: str | None = None
    """The client it was handed to (``None``: not handed out yet)."""
    handed: bool = False
    timer: asyncio.TimerHandle | None = field(default=None, repr=False)

    @property
    def settled(self) -> bool:
        """True once the call has its outcome (or failed)."""
        return self.future.done()

    def hand_to(self, client: str | None) -> None:
        """Mark the call as handed to ``client``; unless it answers within the tool's timeout (and
        :data:`GRACE`), the code gets :class:`McpTimeout`."""
        if self.handed:
            return
        self.handed, self.taker = True, client
        limit = self.question.timeout
        if limit is not None and not self.settled:
            self.timer = asyncio.get_running_loop().call_later(limit + GRACE, self._expire, limit)

    def hand_again(self, client: str | None) -> None:
        """Hand it to ``client`` (a reattach), with a fresh bound to answer it: for a check or a
        question, which only the first answer settles."""
        self._stop_timer()
        self.handed = False
        self.hand_to(client)

    def settle(self, answer: object) -> None:
        """Hand the application's ``answer`` (the outcome's text) to the code."""
        try:
            value = outcome_value(answer, self.question.tool)
        except (ToolError, McpTimeout) as error:
            self.fail(error)
            return
        if not self.settled:
            self.future.set_result(value)
        self._stop_timer()

    def fail(self, error: BaseException) -> None:
        """The code's call raises ``error``."""
        if not self.settled:
            self.future.set_exception(error)
        self._stop_timer()

    def withdraw(self) -> None:
        """Nobody waits for the outcome any more."""
        self.future.cancel()
        self._stop_timer()

    def _expire(self, limit: float) -> None:
        who = f" ({self.taker})" if self.taker else ""
        self.fail(
            McpTimeout(
                f"agent tool {self.question.tool!r} did not answer within {limit:g} s: the application "
                f"process that took the call{who} did not come back with its outcome (it may have run)",
                server=HOST_SERVER,
            )
        )

    def _stop_timer(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None


@dataclass(eq=False)
class HandedCheck(HandedCall):
    """One call of the code that waits for the client's ``before_call`` check; the future's
    result is the refusal (``None``: the call goes on to the policy)."""

    request: ApprovalRequest = field(kw_only=True)

    def settle(self, answer: object) -> None:
        """The client's answer (the response's ``content``): allow or refuse."""
        if not self.settled:
            self.future.set_result(protocol.check_refusal(answer))
        self._stop_timer()

    def _expire(self, limit: float) -> None:
        who = f" ({self.taker})" if self.taker else ""
        self.settle({"refuse": not_checked(self.question.tool, f"within {limit + GRACE:g} s{who}")})


@dataclass(eq=False)
class HandedQuestion(HandedCall):
    """An MCP server's question during a call of the code, relayed to the client
    (``ipybox.dev/question``); the first answer counts, and one not given within the question's
    timeout (the approval timeout) and :data:`GRACE` of being handed out is declined, so the
    server's call (and the code) goes on."""

    elicitation: ElicitationRequest = field(kw_only=True)

    @classmethod
    def of(cls, elicitation: ElicitationRequest, wait_for: float) -> HandedQuestion:
        """The question ``elicitation``, answered within ``wait_for`` seconds of being handed out."""
        what = elicitation.tool or elicitation.server
        question = CallQuestion(secrets.token_urlsafe(12), what, {}, wait_for)
        handed = cls(question, asyncio.get_running_loop().create_future(), elicitation=elicitation)
        elicitation.add_done_callback(lambda _: handed._stop_timer())
        return handed

    @property
    def settled(self) -> bool:
        """True once the question is answered (by the client, or declined on its behalf)."""
        return not self.elicitation.pending

    def settle(self, answer: object) -> None:
        """The client's input response (an ``ElicitResult`` or its dict form): its ``action`` and
        ``content`` answer the question; content that breaks the form declines it, saying why."""
        if self.settled:
            return
        action, content = _field(answer, "action"), _field(answer, "content")
        fields = dict(content) if isinstance(content, Mapping) else {}
        if action == "accept":
            try:
                self.elicitation.respond(ElicitationAnswer.accept(fields))
            except ElicitationContentError as error:
                self.fail(ValueError(f"the application's answer does not fit the form: {error}"))
            return
        reason = fields.get("reason")
        self.elicitation.respond(
            ElicitationAnswer(
                "cancel" if action == "cancel" else "decline",
                reason=reason if isinstance(reason, str) and reason else None,
            )
        )

    def fail(self, error: BaseException) -> None:
        """Decline the question on the user's behalf (``error`` says why, to the code)."""
        self.elicitation.decline_unanswered(str(error))
        self._stop_timer()

    def withdraw(self) -> None:
        self._stop_timer()

    def _expire(self, limit: float) -> None:
        who = f" ({self.taker})" if self.taker else ""
        self.fail(
            TimeoutError(
                f"nobody answered within {limit + GRACE:g} s: the application process that took the "
                f"question{who} did not come back with the answer"
            )
        )


def _field(response: object, name: str) -> object:
    """``name`` of an input response (an :class:`ElicitResult` or its dict form)."""
    return response.get(name) if isinstance(response, Mapping) else getattr(response, name, None)


def not_checked(name: str, why: str) -> str:
    """The refusal of a call whose before-call check was not answered."""
    return (
        f"the application did not answer the before-call check of {name} {why}, so the call was "
        "refused (it was not sent)"
    )


class HostCalls:
    """The agent tools of one client session and the calls of its code that wait for them."""

    def __init__(self) -> None:
        self._signature: str | None = None
        self._timeouts: dict[str, float | None] = {}
        self._new: deque[HandedCall] = deque()
        self._open: set[HandedCall] = set()
        self._arrived = asyncio.Event()
        self._check_wait = 0.0
        self.questions = False
        """Whether the client of the latest round answers MCP servers' questions (in rounds)."""

    async def serve(self, executor: CodeExecutor, data: object, *, wait_for: float) -> None:
        """Give ``executor``'s kernel the tools ``data`` defines (unchanged ones: nothing to do); a
        call may wait ``wait_for`` seconds (the approval timeout) to be taken.

        Raises:
            ConfigError: ``data`` is not a list of tool definitions, or an MCP server of the
                service is named ``agent_tools``.
        """
        signature = json.dumps(data, sort_keys=True, default=str)
        if signature == self._signature:
            return
        default = executor.call_timeout
        given = tools_from_data(data, self._run)
        limits = {tool.name: tool.timeout if tool.timeout is not None else default for tool in given}
        tools = [dataclasses.replace(tool, timeout=_backstop(wait_for, limits[tool.name])) for tool in given]
        await executor.register_host_tools(tools)
        self._signature, self._timeouts = signature, limits

    def check_calls(self, execution: Execution, on: bool, *, wait_for: float) -> None:
        """Ask the client about each call of ``execution``'s code before the policy decides it
        (``on``), or not; a check may wait ``wait_for`` seconds (the approval timeout) to be taken."""
        self._check_wait = wait_for
        execution.before_call = self.check if on else None

    async def check(self, request: ApprovalRequest) -> str | None:
        """``Execution.before_call`` over the service: the client's refusal of ``request``'s call
        (``None``: it goes on); a check not answered in time, or abandoned, refuses the call."""
        question = CallQuestion(secrets.token_urlsafe(12), request.name, request.args, CHECK_TIMEOUT)
        handed = HandedCheck(question, asyncio.get_running_loop().create_future(), request=request)
        bound = self._check_wait + CHECK_TIMEOUT + 2 * GRACE
        try:
            refusal: str | None = await asyncio.wait_for(self._wait(handed), bound)
        except TimeoutError:
            return not_checked(request.name, f"within {bound:g} s")
        except ExecutionCancelled:
            return not_checked(request.name, "before the execution ended")
        return refusal

    def watch(self, execution: Execution) -> None:
        """Fail the calls still waiting when ``execution`` ends (cancelled, timed out, died)."""
        execution.add_done_callback(lambda _: self._abandon())

    def take(self) -> HandedCall | None:
        """The oldest call the driver has not handed on yet."""
        if not self._new:
            self._arrived.clear()
            return None
        return self._new.popleft()

    async def arrival(self) -> None:
        """Wait until a call is there to :meth:`take`."""
        while not self._new:
            self._arrived.clear()
            await self._arrived.wait()

    async def _run(self, call: HostCall) -> Any:
        question = CallQuestion(
            secrets.token_urlsafe(12), call.tool, call.arguments, self._timeouts.get(call.tool)
        )
        return await self._wait(HandedCall(question, asyncio.get_running_loop().create_future()))

    async def _wait(self, handed: HandedCall) -> Any:
        """Queue ``handed`` for the driver and wait for its outcome."""
        self._open.add(handed)
        self._new.append(handed)
        self._arrived.set()
        try:
            return await handed.future
        finally:
            self._open.discard(handed)
            with contextlib.suppress(ValueError):
                self._new.remove(handed)
            handed.withdraw()  # done, or the tool server gave up on it (its backstop)

    def _abandon(self) -> None:
        for handed in list(self._open):
            handed.fail(ExecutionCancelled("the execution ended before the application answered"))
        self._new.clear()


def _backstop(wait_for: float, limit: float | None) -> float | None:
    """The tool server's own bound of a relayed call: waiting to be taken, then the tool's timeout."""
    return None if limit is None else wait_for + limit + 2 * GRACE
