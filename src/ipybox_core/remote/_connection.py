"""One MCP connection to an ipybox service, and ``execute_code`` rounds over it."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Mapping
from typing import Any, TypeVar, cast

import httpx2
from mcp.client import Client
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp_types import CallToolResult, ElicitResult, InputRequiredResult, InputResponses, RequestParamsMeta

from ipybox_core import protocol
from ipybox_core.approval import ApprovalRules
from ipybox_core.errors import ExecutionGone, ServiceError
from ipybox_core.remote._link import Link, LinkDown

TOKEN_ENV = "IPYBOX_MCP_TOKEN"
INBOX_SESSION = "ipybox-inbox"
"""The session the inbox's calls name (they start no kernel; no approval waits in it)."""
Round = CallToolResult | InputRequiredResult
GONE = "the execution waiting for this approval is gone (the ipybox service restarted or forgot it)"
_OUTPUT_GRACE = 1.0  # seconds to wait for output notifications behind a round's result
_FIRST_RETRY, _LAST_RETRY = 0.1, 2.0  # seconds between attempts to reach a service not up yet
T = TypeVar("T")


def default_client_name() -> str:
    """``<host>-<pid>``: the name the service's audit log records for this process's decisions."""
    return protocol.plain_name(f"{socket.gethostname()}-{os.getpid()}")


class ServiceConnection:
    """An authenticated MCP client of ``url`` (protocol 2026-07-28) that runs ``execute_code`` rounds.

    The connection is held by a task of its own (:class:`~._link.Link`): while the service is
    unreachable each call raises :class:`ServiceError` in the task that made it, nothing else; the
    next call connects again. :meth:`open` can wait for a service that is not up yet.
    """

    def __init__(
        self,
        url: str,
        *,
        token: str | None,
        client_name: str,
        connect_timeout: float = 30.0,
    ) -> None:
        self.url = url
        self.client_name = client_name
        self._has_token = bool(token)
        self._headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._connect_timeout = connect_timeout
        self._link: Link | None = None
        self._linking: asyncio.Lock | None = None
        self._closed = False

    async def open(self, *, wait: float = 0.0) -> None:
        """Connect, trying again for up to ``wait`` seconds while the service is unreachable (a
        refused token fails at once).

        Raises:
            ServiceError: the service could not be reached (or refused the token).
        """
        self._closed = False
        loop = asyncio.get_running_loop()
        deadline, delay = loop.time() + wait, _FIRST_RETRY
        while True:
            try:
                await self._linked()
                return
            except _Unreachable as error:
                if error.refused or loop.time() + delay > deadline:
                    raise ServiceError(str(error)) from None
            await asyncio.sleep(delay)
            delay = min(delay * 2, _LAST_RETRY)

    async def aclose(self) -> None:
        """Close the connection (the next call after :meth:`open` connects again)."""
        self._closed = True
        link, self._link = self._link, None
        if link is not None:
            await link.aclose()

    @contextlib.asynccontextmanager
    async def _connect(self) -> AsyncIterator[ClientSession]:
        # No read timeout: a round lasts as long as the code runs (the service bounds it).
        timeout = httpx2.Timeout(self._connect_timeout, read=None)
        async with create_mcp_http_client(headers=self._headers, timeout=timeout) as http:
            transport = streamable_http_client(self.url, http_client=http)
            async with Client(transport, mode="auto", elicitation_callback=_never_inline) as client:
                yield client.session

    async def _linked(self) -> Link:
        """The open link, connecting a new one when there is none or the last one went down."""
        if self._linking is None:
            self._linking = asyncio.Lock()
        async with self._linking:
            link = self._link
            if link is not None and link.alive:
                return link
            if link is not None:
                await link.aclose()
            self._link = link = Link(self._connect)
            try:
                await link.open()
            except Exception as error:
                self._link = None
                await link.aclose()
                reason = _reason(error, self._has_token)
                raise _Unreachable(
                    f"cannot connect to the ipybox service at {self.url}: {reason}", refused="(401)" in reason
                ) from None
            return link

    async def _run(self, what: str, call: Callable[[ClientSession], Awaitable[T]]) -> T:
        """``call`` over the link, in the calling task; an outage is a :class:`ServiceError` here."""
        if self._closed:
            raise ServiceError(f"the connection to the ipybox service at {self.url} is closed")
        try:
            link = await self._linked()
        except _Unreachable as error:
            raise ServiceError(str(error)) from None
        try:
            return await link.run(call)
        except LinkDown as down:
            raise ServiceError(
                f"the ipybox service at {self.url} went away during {what}: {down} (the next call "
                "connects again)"
            ) from None

    async def execute(
        self,
        session: str,
        *,
        arguments: Mapping[str, Any],
        call: str | None = None,
        resume: bool = False,
        input_responses: InputResponses | None = None,
        request_state: str | None = None,
        on_output: OnOutput | None = None,
        on_tool_call: OnToolCall | None = None,
        rules: ApprovalRules | None = None,
        host_tools: list[dict[str, Any]] | None = None,
        before_call: bool = False,
        questions: bool = False,
    ) -> Round:
        """One ``tools/call execute_code`` round for ``session``; ``on_output(stream, text)`` gets
        the code's output as it is printed, all of it before this returns; ``rules`` narrow the
        service's approval rules for this call; ``host_tools`` are the definitions of the agent
        tools its code can call; ``on_tool_call(data)`` gets each decided call of the code, in
        order with the output (``ipybox.dev/output``); ``before_call``: the service asks this
        client about each call of the code before its policy decides it (``ipybox.dev/check``);
        ``questions``: MCP servers' questions come to this client (``ipybox.dev/question``)."""
        meta: dict[str, Any] = {protocol.SESSION: session, protocol.CLIENT: self.client_name}
        if call is not None:
            meta[protocol.CALL] = call
        if resume:
            meta[protocol.RESUME] = True
        if rules is not None:
            meta[protocol.RULES] = protocol.rules_data(rules)
        if host_tools is not None:
            meta[protocol.HOST_TOOLS] = host_tools
        if before_call:
            meta[protocol.BEFORE_CALL] = True
        if questions:
            meta[protocol.QUESTIONS] = True
        output = _Output(on_output, on_tool_call) if on_output is not None else None
        if output is not None:
            meta[protocol.OUTPUT] = True
        try:
            result: Round = await self._run(
                "execute_code",
                lambda session: session.call_tool(
                    "execute_code",
                    dict(arguments),
                    input_responses=input_responses,
                    request_state=request_state,
                    meta=cast(RequestParamsMeta, meta),
                    progress_callback=output.receive if output is not None else None,
                    allow_input_required=True,
                ),
            )
        except ServiceError:
            raise
        except Exception as error:
            reason = _reason(error)
            if request_state is not None and "requestState" in reason:  # the service restarted since
                raise ExecutionGone(f"{GONE}: {reason}", cause="restarted") from None
            raise ServiceError(f"the ipybox service at {self.url} failed the request: {reason}") from None
        if output is not None:
            await output.complete(result.meta)
        return result

    async def cancel_waiting(
        self,
        session: str,
        *,
        calls: Collection[str] | None = None,
        keep: Collection[str] = (),
        reason: str | None = None,
    ) -> int:
        """Cancel the executions of ``session`` that wait for an approval (only ``calls`` if given,
        never ``keep``); returns how many."""
        arguments: dict[str, Any] = {"keep_calls": sorted(keep)}
        if calls is not None:
            arguments["calls"] = sorted(calls)
        if reason is not None:
            arguments["reason"] = reason[:500]
        return int(await self.call_tool(session, "cancel_waiting", arguments))

    async def call_tool(self, session: str, name: str, arguments: Mapping[str, Any]) -> str:
        """Call one of the service's other tools for ``session``; returns its text."""
        result = await self.tool_result(session, name, arguments)
        return "\n".join(getattr(block, "text", "") for block in result.content)

    async def tool_result(self, session: str, name: str, arguments: Mapping[str, Any]) -> CallToolResult:
        """Call one of the service's other tools for ``session``; returns its result (an error
        result raises: the ipybox error it carries, else :class:`ServiceError`)."""
        meta = {protocol.SESSION: session, protocol.CLIENT: self.client_name}
        try:
            result = await self._run(
                name,
                lambda session: session.call_tool(name, dict(arguments), meta=cast(RequestParamsMeta, meta)),
            )
        except ServiceError:
            raise
        except Exception as error:
            raise ServiceError(f"the ipybox service at {self.url} failed {name}: {_reason(error)}") from None
        text = "\n".join(getattr(block, "text", "") for block in result.content)
        if result.is_error:
            failure = protocol.meta_value(result.meta, protocol.ERROR)
            if failure is not None:  # an ipybox error as data: its own exception
                raise protocol.decode_error(failure, text)
            raise ServiceError(f"the ipybox service refused {name}: {text}")
        return result

    async def waiting_approvals(self, conversation: str | None = None) -> list[protocol.WaitingApproval]:
        """The approvals inbox: what waits in the service (in ``conversation`` only, if given)."""
        arguments = {} if conversation is None else {"conversation": conversation}
        text = await self.call_tool(INBOX_SESSION, "list_approvals", arguments)
        try:
            listed = json.loads(text)["approvals"]
        except (ValueError, KeyError, TypeError):
            raise ServiceError("the service's list_approvals answer is not an approvals list") from None
        return [protocol.waiting_from_data(item) for item in listed]

    async def answer_approval(
        self,
        approval_id: str,
        *,
        approve: bool,
        reason: str | None = None,
        arguments: Mapping[str, Any] | None = None,
    ) -> protocol.WaitingApproval:
        """Decide the waiting approval ``approval_id`` from the inbox (as ``client:<name>``);
        returns it as it was listed."""
        data: dict[str, Any] = {"approval_id": approval_id, "approve": approve}
        if reason is not None:
            data["reason"] = reason[:2000]
        if arguments is not None:
            data["arguments"] = dict(arguments)
        result = await self.tool_result(INBOX_SESSION, "answer_approval", data)
        return protocol.waiting_from_data(protocol.meta_value(result.meta, protocol.APPROVAL))


class _Unreachable(Exception):
    """Connecting failed; ``refused``: the service answered 401 (trying again will not help)."""

    def __init__(self, message: str, *, refused: bool) -> None:
        super().__init__(message)
        self.refused = refused


OnOutput = Callable[[str, str], None]
"""Receives ``(stream, text)`` of the code's output as it is printed."""
OnToolCall = Callable[[Any], None]
"""Receives each decided call of the code, as ``protocol.tool_call_data`` encoded it."""


class _Output:
    """The output notifications of one round, handed on in order, each once."""

    def __init__(self, on_output: OnOutput, on_tool_call: OnToolCall | None = None) -> None:
        self._on_output = on_output
        self._on_tool_call = on_tool_call
        self._seen = 0.0
        self._arrived = asyncio.Event()

    async def receive(self, progress: float, total: float | None, message: str | None) -> None:
        if message is None or progress <= self._seen:
            return
        try:
            data = json.loads(message)
        except ValueError:
            return
        if not isinstance(data, dict) or not (protocol.TOOL_CALL in data or "text" in data):
            return
        self._seen = progress
        self._arrived.set()
        self._hand_on(data)

    def _hand_on(self, item: dict[str, Any]) -> None:
        if protocol.TOOL_CALL in item:
            if self._on_tool_call is not None:
                self._on_tool_call(item[protocol.TOOL_CALL])
        elif isinstance(item.get("text"), str):
            self._on_output("stderr" if item.get("stream") == "stderr" else "stdout", item["text"])

    async def complete(self, meta: Any) -> None:
        """Wait (briefly) for notifications still in flight when the round's result came, then
        hand on the output the service held back (``ipybox.dev/held_output``)."""
        streamed = protocol.meta_value(meta, protocol.STREAMED)
        if isinstance(streamed, int | float):
            deadline = asyncio.get_running_loop().time() + _OUTPUT_GRACE
            while self._seen < streamed:
                self._arrived.clear()
                remaining = deadline - asyncio.get_running_loop().time()
                if remaining <= 0:
                    break
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._arrived.wait(), remaining)
        held = protocol.meta_value(meta, protocol.HELD_OUTPUT)
        for item in held if isinstance(held, list) else ():
            if isinstance(item, dict):
                self._hand_on(item)


async def _never_inline(context: Any, params: Any) -> ElicitResult:
    """Declares elicitation support; on protocol 2026-07-28 questions come back as rounds instead."""
    return ElicitResult(action="decline", content={"reason": "this client answers approvals as rounds"})


def _reason(error: BaseException, has_token: bool = True) -> str:
    status = getattr(getattr(error, "response", None), "status_code", None)
    text = str(error) or type(error).__name__
    if not has_token and (status == 401 or text.startswith("Unauthorized")):
        return (
            f"the service requires a token (401) and none was given: {TOKEN_ENV} is unset; pass "
            f"token= or set {TOKEN_ENV} to the token the service prints at start"
        )
    if status == 401:
        return f"the service refused the token (401): pass token= or set {TOKEN_ENV}"
    if isinstance(error, BaseExceptionGroup):
        text = "; ".join(_reason(inner, has_token) for inner in error.exceptions)
    return text
