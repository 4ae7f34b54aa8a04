"""The code's output, sent to the MCP client as it is printed: progress notifications of the call."""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import TYPE_CHECKING, Any, TypeVar

from mcp_types import CallToolResult, InputRequiredResult

from ipybox_core import protocol

if TYPE_CHECKING:
    from mcp.server.mcpserver import Context

    from ipybox_core.executor import OutputChunk, ToolCall

RoundT = TypeVar("RoundT", CallToolResult, InputRequiredResult)

LIVE_AFTER = 0.1
"""Seconds of a round after which output goes out as it is printed. A round that ends sooner
answers with one plain JSON response (a notification would turn it into a slower event stream,
which the client cannot reuse the connection of) and hands its output over with the result."""


class OutputRelay:
    """Sends the output chunks of an ``execute_code`` round as ``notifications/progress`` of the
    request, when the client asked for progress (a ``progressToken``; none without a request, ``ctx``
    ``None``: an execution the approvals inbox continued): the ``message`` is the text,
    or ``{"stream", "text"}`` as JSON for a client that set ``ipybox.dev/output``.

    Output of the round's first :data:`LIVE_AFTER` seconds is held; from then on (or when the
    round ends) it is sent. ``progress`` counts the characters sent; the round's result reports
    the total (``ipybox.dev/streamed``) and, for ``ipybox.dev/output`` clients, carries what was
    still held (``ipybox.dev/held_output``). At most ``limit`` characters are relayed: the result
    has the head and tail of longer output.
    """

    def __init__(self, ctx: Context[Any, Any] | None, *, limit: int, live_after: float = LIVE_AFTER) -> None:
        meta = ctx.request_context.meta if ctx is not None else None
        self._ctx = ctx
        self._on = ctx is not None and protocol.meta_value(meta, "progress_token") is not None
        self._as_json = protocol.meta_value(meta, protocol.OUTPUT) is True
        self._room = limit
        self._held: list[OutputChunk | dict[str, Any]] = []  # output, and calls as data
        self._live = False
        self._lock = asyncio.Lock()  # notifications go out one at a time, in order
        self._timer = asyncio.get_running_loop().call_later(live_after, self._go_live) if self._on else None
        self._flushing: asyncio.Task[None] | None = None
        self.sent = 0
        """Characters sent as notifications in this round."""

    async def send(self, chunk: OutputChunk) -> None:
        if not self._on or self._room <= 0 or not chunk.text:
            return
        if len(chunk.text) > self._room:
            chunk = type(chunk)(chunk.text[: self._room], chunk.stream)
        self._room -= len(chunk.text)
        self._held.append(chunk)
        if self._live:
            await self._flush()

    async def send_call(self, call: ToolCall) -> None:
        """Relay a decided call of the code (to ``ipybox.dev/output`` clients only), in order with
        the output; it counts one unit of ``progress``, whatever the output limit."""
        if not self._on or not self._as_json:
            return
        self._held.append(protocol.tool_call_data(call))
        if self._live:
            await self._flush()

    def close(self) -> None:
        """The round ended without a result (its request was cancelled): send nothing more."""
        self._on = False
        if self._timer is not None:
            self._timer.cancel()

    async def finish(self, result: RoundT) -> RoundT:
        """The round's ``result`` (a tool result) with what it must tell about the output."""
        if self._timer is not None:
            self._timer.cancel()
        if self._flushing is not None:
            with contextlib.suppress(Exception):
                await self._flushing
        meta: dict[str, Any] = {}
        if self.sent:
            meta[protocol.STREAMED] = self.sent
        if self._held and self._as_json:
            meta[protocol.HELD_OUTPUT] = [_item(held) for held in self._held]
        if meta:
            result.meta = {**(result.meta or {}), **meta}
        return result

    def _go_live(self) -> None:
        self._live = True
        if self._held:
            self._flushing = asyncio.ensure_future(self._flush())

    async def _flush(self) -> None:
        async with self._lock:
            items, self._held = self._held, []
            for item in items:
                self.sent += 1 if isinstance(item, dict) else len(item.text)
                if self._as_json:
                    text = json.dumps(_item(item), ensure_ascii=False, default=str)
                else:
                    assert not isinstance(item, dict)  # calls go to ipybox.dev/output clients only
                    text = item.text
                with contextlib.suppress(Exception):  # the client went away: the request ends anyway
                    assert self._ctx is not None  # on only with a request to notify
                    await self._ctx.report_progress(self.sent, None, text)


def _item(held: OutputChunk | dict[str, Any]) -> dict[str, Any]:
    """A held output chunk or call as an ``ipybox.dev/output`` client reads it."""
    if isinstance(held, dict):
        return {protocol.TOOL_CALL: held}
    return {"stream": held.stream, "text": held.text}
